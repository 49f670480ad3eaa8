"""Training-stack benchmark (JSON lines): data-pipeline tokens/s per core against what the trainer consumes,
async checkpoint cost as a fraction of step time, and the step's tokens/s and MFU.

    python -m benchmarks.perf.train_stack                 # toy preset on CPU, ~1 minute
    python -m benchmarks.perf.train_stack --preset gpu_small --seq_len 8192 --batch 1 --steps 20 --no-pipeline   # one
    H200

On GPU the attention kernel defaults to 'ring' (one device: one cuDNN flash block, no [B, H, T, T] logits; strict
kernels make a fallback an error). The GPU sizes are those tests/test_gpu_fit.py compiles on CPU against one H200.

Ratios are measured side by side in one run. Goal: checkpoint cost ≤ 5 % of step time at the configured save
interval; the pipeline must produce tokens faster than the trainer consumes them.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import jax
import numpy as np

from benchmarks.perf.common import add_strict_flag, apply_strict, emit
from composer2_jax import chips
from composer2_jax import sharding as shd
from composer2_jax.model import Transformer
from composer2_jax.model_config import get_model_config
from composer2_jax.params import count_params
from composer2_jax.sharding import activate
from composer2_jax.train import optim
from composer2_jax.train.checkpoint import Checkpointer
from composer2_jax.train.metrics import flops_per_token, mfu
from composer2_jax.train.state import init_train_state
from composer2_jax.train.step import StepConfig, batch_shardings, make_train_step


def pipeline_rate(seq_len: int, batch: int, n_batches: int) -> float:
    """Tokens/s of the default grain pipeline (stdlib corpus, byte tokenizer) on this process.

    Imports the data stack here, not at module level: the step benchmark runs where grain is not installed.
    """
    from composer2_jax.data import pipeline as data_lib
    from composer2_jax.data.tokenizer import make_tokenizer

    dc = data_lib.data_config(None, seq_len=seq_len, batch_size=batch, prefetch_batches=0)
    it = data_lib.make_iterator(dc, make_tokenizer("byte"))
    next(it)  # index the corpus outside the timing
    t = time.perf_counter()
    for _ in range(n_batches):
        next(it)
    return n_batches * batch * seq_len / (time.perf_counter() - t)


def checkpoint_cost(step, state, batch, step_s: float, k: int = 10) -> tuple[float, float]:
    """(blocking seconds of an async save, extra seconds over k steps run while it writes), in a temporary folder."""
    with tempfile.TemporaryDirectory() as d:
        ck = Checkpointer(d, max_to_keep=2, async_save=True)
        t = time.perf_counter()
        ck.save(1, state)
        blocking_s = time.perf_counter() - t
        for _ in range(k):
            state, m = step(state, batch)
        jax.block_until_ready(m["loss"])
        ck.wait()
        extra_s = time.perf_counter() - t - k * step_s  # blocking part + slowdown + any wait at the end
        ck.close()
    return blocking_s, max(extra_s, 0.0)


def train_config(preset: str, dtype: str = "", attention_kernel: str = "auto", mtp: int = 0):
    """The benchmarked model: `preset` with MTP depth `mtp`; attention 'auto' = 'ring' on GPU (one fused block), else
    the preset's."""
    over = dict({"dtype": dtype} if dtype else {}, num_mtp_layers=mtp)
    if attention_kernel == "auto":
        attention_kernel = "ring" if jax.default_backend() == "gpu" else ""
    if attention_kernel:
        over["attention_kernel"] = attention_kernel
    return get_model_config(preset, **over)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="toy")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq_len", type=int, default=256)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--save_every", type=int, default=100, help="the save interval the cost fraction refers to")
    ap.add_argument("--dtype", default="")
    ap.add_argument("--attention_kernel", default="auto", help="'auto': ring (one cuDNN block) on GPU, else preset's")
    ap.add_argument("--optimizer", default="adamw", choices=("adamw", "muon"))
    ap.add_argument("--pipeline", action=argparse.BooleanOptionalAction, default=True,
                    help="also time the grain data pipeline (needs grain; the device image has none)")
    ap.add_argument("--checkpoint", action=argparse.BooleanOptionalAction, default=True,
                    help="also time an async checkpoint (writes the whole state to a temporary folder)")
    ap.add_argument("--mtp", type=int, default=0, help="MTP depth (0: the trunk alone, as RESULTS.md measured it)")
    add_strict_flag(ap)
    a = ap.parse_args(argv)
    apply_strict(a)
    cfg = train_config(a.preset, a.dtype, a.attention_kernel, mtp=a.mtp)
    mesh = shd.make_mesh({"fsdp": -1})
    oc = optim.OptimConfig(name=a.optimizer, lr=1e-4, warmup_steps=1, total_steps=a.steps)
    model = Transformer(cfg, mesh)
    state, shardings, tx = init_train_state(model, lambda p, n: optim.make_optimizer(oc, p, n), mesh,
                                            jax.random.key(0), (a.batch, a.seq_len))
    bs = batch_shardings(mesh)
    rng = np.random.default_rng(0)
    tok = rng.integers(0, min(cfg.vocab_size, 256), (a.batch, a.seq_len + 1)).astype(np.int32)
    host = dict(tokens=tok[:, :-1], targets=tok[:, 1:], loss_mask=np.ones((a.batch, a.seq_len), np.int32),
                segment_ids=np.ones((a.batch, a.seq_len), np.int32),
                positions=np.broadcast_to(np.arange(a.seq_len, dtype=np.int32), (a.batch, a.seq_len)).copy())
    with activate(mesh):
        batch = {k: jax.device_put(v, bs[k]) for k, v in host.items()}
        step = jax.jit(make_train_step(model, tx, StepConfig()), donate_argnums=0,
                       in_shardings=(shardings, bs), out_shardings=(shardings, None))
        state, m = step(state, batch)
        jax.block_until_ready(m["loss"])
        t = time.perf_counter()
        for _ in range(a.steps):
            state, m = step(state, batch)
        jax.block_until_ready(m["loss"])
        step_s = (time.perf_counter() - t) / a.steps
        tps = a.batch * a.seq_len / step_s
        _, active = count_params(state.params, cfg)
        chip = chips.get_chip(chips.detect_chip())
        emit(bench="train_step", preset=a.preset, attention_kernel=cfg.attention_kernel, optimizer=a.optimizer,
             backend=jax.default_backend(), devices=jax.device_count(), batch=a.batch, seq_len=a.seq_len,
             step_s=round(step_s, 5), tokens_per_s=round(tps, 1),
             mfu=round(mfu(tps, flops_per_token(cfg, active, a.seq_len), chip.peak_bf16_flops, jax.device_count()),
                       4), chip=chip.name)
        if a.checkpoint:
            blocking_s, extra_s = checkpoint_cost(step, state, batch, step_s)
            emit(bench="async_checkpoint", blocking_s=round(blocking_s, 4), extra_s=round(extra_s, 4),
                 step_s=round(step_s, 5), save_every=a.save_every,
                 cost_fraction=round(extra_s / (a.save_every * step_s), 4), goal="<= 0.05")
    if not a.pipeline:
        return
    cores = os.cpu_count() or 1
    rate = pipeline_rate(a.seq_len, a.batch, 50)
    emit(bench="data_pipeline", tokens_per_s=round(rate, 1), tokens_per_s_per_core=round(rate / cores, 1),
         trainer_tokens_per_s=round(tps, 1), headroom=round(rate / tps, 2), goal="headroom > 1")


if __name__ == "__main__":
    main()
