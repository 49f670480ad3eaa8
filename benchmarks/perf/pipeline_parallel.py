"""Pipeline parallelism benchmark: JSON lines of ratios measured in one run.

  python benchmarks/perf/pipeline_parallel.py          # CPU, 8 fake devices, stage=2 and 4 (minutes of compile each)
  python benchmarks/perf/pipeline_parallel.py --stages 4 --layers 9   # the stage=4 rows only, on 8 scanned units
  python benchmarks/perf/pipeline_parallel.py --gpu    # every visible GPU (needs ≥ 2: stage = device count)

Each line times one jitted forward+backward of a toy MoE stack (the train step's gradient, no optimizer) at equal
global batch, unpipelined on a (fsdp, expert) mesh and pipelined over `stage` with M microbatches and R repeats
(virtual stages per device), GPipe-like (R = 1, M = S) next to the interleaved schedules (R > 1 and/or M > S):
  schedule          "gpipe" (R = 1, M = S) or "interleaved"
  step_ratio        pipelined / unpipelined wall time
  bubble_formula    (S − 1) / (M·R + S − 1)
  ticks             M·R + S − 1 schedule iterations; compiled_trips: the compiled schedule loops' trip counts
                    (forward, backward; plan/hlo.py `schedule_trip_counts`)
  bubble_measured   1 − t_unpipelined / t_pipelined: the share of the pipelined step spent on no useful work
  permutes          collective-permute ops in the compiled pipelined program (the stage-to-stage sends)
On CPU the 8 fake devices share the same cores, so a time is the total work of all devices: the bubble shows up as
the work the idle stages still execute on placeholder activations, so bubble_measured ≈ bubble_formula is what a
correct schedule gives here (plus the pipeline's copies and sends). On GPUs the stages run concurrently and the
bubble is idle time instead; the same formula bounds it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import sys
import time

if "--gpu" not in sys.argv:  # 8 fake CPU devices; must precede the jax import
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from composer2_jax import sharding as shd
from composer2_jax.losses.lm import chunked_cross_entropy
from composer2_jax.model import Transformer
from composer2_jax.model.pipeline import bubble_fraction
from composer2_jax.model_config import get_model_config
from composer2_jax.plan.hlo import schedule_trip_counts
from composer2_jax.sharding import activate


def emit(**kw):
    """Print one JSON line."""
    print(json.dumps(kw), flush=True)


def timed(fn, *args, reps: int = 3) -> float:
    """Best-of-reps wall seconds of a jitted call (after a compile run)."""
    jax.block_until_ready(fn(*args))
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t0)
    return best


def grad_step(cfg, mesh, batch: int, seq: int):
    """(grad of the LM loss, params, collective-permute ops in its compiled HLO, the schedule loops' trip counts)
    on `mesh`."""
    model = Transformer(cfg, mesh)
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, cfg.vocab_size, (batch, seq)), jnp.int32)
    boxed = jax.eval_shape(lambda: model.init(jax.random.key(0), tokens))
    shardings = shd.logical_shardings(boxed, mesh)
    with activate(mesh):
        variables = jax.jit(lambda: nn.unbox(model.init(jax.random.key(0), tokens)), out_shardings=shardings)()

    def loss(params):
        out = model.apply({"params": params, "router_state": variables["router_state"]}, tokens,
                          compute_logits=False)
        ce = chunked_cross_entropy(out.normed, params["lm_head"], tokens, jnp.ones_like(tokens), 256)
        return ce.loss_sum / tokens.size

    grad = jax.jit(jax.grad(loss))
    with activate(mesh):
        hlo = grad.lower(variables["params"]).compile().as_text()

    def run(params):
        with activate(mesh):
            return grad(params)

    return run, variables["params"], len(re.findall(r"collective-permute(-start)?\(", hlo)), schedule_trip_counts(hlo)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", action="store_true", help="run on the visible GPUs (stage = device count)")
    ap.add_argument("--layers", type=int, default=17, help="decoder layers (1 dense + the scanned MoE stack)")
    ap.add_argument("--seq", type=int, default=64, help="tokens per sequence")
    ap.add_argument("--stages", default="2,4", help="CPU: the stage counts to run (stage=4 compiles take minutes)")
    args = ap.parse_args(argv)
    n = len(jax.devices())
    if args.gpu:
        cfg = get_model_config("gpu_small", num_layers=1 + 4 * n, remat_policy="full")
        layouts = [dict(stage=n, fsdp=1, mb=m, r=r) for m, r in ((n, 1), (2 * n, 1), (2 * n, 2))]
        batch, seq, base = 2 * n * 2, 4096, dict(fsdp=n)
    else:
        cfg = get_model_config("toy", num_layers=args.layers)
        layouts = [dict(stage=2, fsdp=4, mb=2, r=1), dict(stage=2, fsdp=4, mb=8, r=1),
                   dict(stage=2, fsdp=4, mb=8, r=2),
                   dict(stage=4, fsdp=2, mb=4, r=1), dict(stage=4, fsdp=2, mb=4, r=2),
                   dict(stage=4, fsdp=2, mb=8, r=2), dict(stage=4, fsdp=2, mb=16, r=2)]
        wanted = {int(x) for x in args.stages.split(",") if x}
        layouts = [lay for lay in layouts if lay["stage"] in wanted]
        batch, seq, base = 32, args.seq, dict(fsdp=n)
    ref_fn, ref_params, _, _ = grad_step(cfg, shd.make_mesh(base), batch, seq)
    t_ref = timed(ref_fn, ref_params)
    emit(what="unpipelined", mesh=base, batch=batch, seq=seq, layers=cfg.num_layers, seconds=round(t_ref, 4),
         devices=n, platform=jax.devices()[0].platform)
    for lay in layouts:
        pcfg = dataclasses.replace(cfg, pipeline_microbatches=lay["mb"], pipeline_repeats=lay["r"])
        mesh_shape = dict(stage=lay["stage"], fsdp=lay["fsdp"])
        fn, params, n_permutes, trips = grad_step(pcfg, shd.make_mesh(mesh_shape), batch, seq)
        t = timed(fn, params)
        gpipe = lay["r"] == 1 and lay["mb"] == lay["stage"]
        emit(what="pipelined", schedule="gpipe" if gpipe else "interleaved", mesh=mesh_shape,
             microbatches=lay["mb"], repeats=lay["r"], seconds=round(t, 4), step_ratio=round(t / t_ref, 3),
             ticks=lay["mb"] * lay["r"] + lay["stage"] - 1, compiled_trips=trips,
             bubble_formula=round(bubble_fraction(lay["stage"], lay["mb"], lay["r"]), 3),
             bubble_measured=round(1 - t_ref / t, 3), permutes=n_permutes)


if __name__ == "__main__":
    main()
