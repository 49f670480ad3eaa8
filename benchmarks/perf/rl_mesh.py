"""RL services on meshes: sharded vs unsharded rollout engine, weight sync between meshes, and η = 0/1/2 with the
trainer and the rollout engine on disjoint device sets. JSON lines.

    python -m benchmarks.perf.rl_mesh                 all three parts, 8 fake CPU devices (~6 min on 2 cores)
    python -m benchmarks.perf.rl_mesh --only engine   one part: engine | sync | eta

engine  greedy multi-session decoding (toy MoE, `--sessions` sessions of `--tokens` tokens) on one device and on
        devices[4:8] as expert=2 × tensor=2; tokens/s after a warm-up (compile excluded), same tokens checked
sync    the trainer's parameters (devices[0:4], fsdp=2 × expert=2) resharded onto an engine (`update_weights`: one
        device_put onto its NamedShardings, blocked until ready): disaggregated (devices[4:8], expert=2 × tensor=2),
        colocated (the same devices[0:4], expert=2 × tensor=2) and unsharded (devices[4]); median seconds per
        publish and bytes moved
eta     the embedded RL loop with the real trainer (devices[0:4]), rollout engine (devices[4:8]) and sandboxes on the
        micro model, disaggregated, at η = 0, 1, 2: episodes trained per second between the first and the last
        version (compile excluded), staleness

Fake CPU devices share the machine's cores: a sharded program is the same total work split into more, smaller
programs plus collectives, and "disjoint" device sets still run on the same two cores. Every figure is therefore
relative (sharded vs unsharded, η vs η) and says nothing about real accelerators.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

if "--gpu" not in sys.argv:  # 8 fake CPU devices; must precede the jax import
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"

import jax
import numpy as np

from composer2_jax import sharding as shd
from composer2_jax.infer import SamplingParams
from composer2_jax.infer.rollout_engine import EngineConfig, RolloutEngine
from composer2_jax.infer.static_engine import param_shardings
from composer2_jax.infer.testing import random_variables
from composer2_jax.model_config import get_model_config

AXES = dict(stage=1, data=1, fsdp=1, expert=1, tensor=1, context=1)


def mesh(devices, **axes):
    """A mesh over these devices with the given axis sizes (the rest 1)."""
    return shd.make_mesh({**AXES, **axes}, devices=devices)


def emit(**row) -> None:
    print(json.dumps(row), flush=True)


def engine_part(args) -> None:
    """Greedy decoding tokens/s: unsharded vs expert=2 × tensor=2 on devices[4:8]."""
    cfg = get_model_config("toy", num_layers=2, num_mtp_layers=0, vocab_size=256)
    v = random_variables(cfg, seed=0, head_scale=20.0)
    ecfg = EngineConfig(slots=args.sessions, chunk=32, prefill_rows=2, page_size=16, num_pages=8 * args.sessions,
                        max_len=128)
    r = np.random.default_rng(0)
    prompts = [r.integers(0, 256, 16).tolist() for _ in range(2 * args.sessions)]
    sp = SamplingParams(temperature=0.0, max_tokens=args.tokens)
    out = {}
    for name, m in (("unsharded", None), ("expert2_tensor2", mesh(jax.devices()[4:8], expert=2, tensor=2))):
        eng = RolloutEngine(cfg, v["params"], v["router_state"], ecfg, m)
        for half in (0, 1):  # the first half warms up (compiles); the second is timed
            batch = prompts[half * args.sessions:(half + 1) * args.sessions]
            t0 = time.perf_counter()
            futs = [eng.reply(eng.open(p), sp) for p in batch]
            eng.run()
            dt = time.perf_counter() - t0
        out[name] = ([f.result().tokens for f in futs], len(batch) * args.tokens / dt)
        emit(part="engine", engine=name, devices=len(eng.devices), tokens_per_s=round(out[name][1], 1),
             sessions=args.sessions, tokens=args.tokens)
    emit(part="engine", sharded_over_unsharded=round(out["expert2_tensor2"][1] / out["unsharded"][1], 3),
         same_tokens=out["expert2_tensor2"][0] == out["unsharded"][0])


def sync_part(args) -> None:
    """Seconds per publish: the trainer's sharded params resharded onto an engine's mesh."""
    cfg = get_model_config("toy", num_layers=2, num_mtp_layers=0, vocab_size=256)
    v = random_variables(cfg, seed=0)
    devs = jax.devices()
    p_sh, r_sh = param_shardings(cfg, mesh(devs[:4], fsdp=2, expert=2))
    params, router = jax.device_put(v["params"], p_sh), jax.device_put(v["router_state"], r_sh)
    nbytes = sum(x.nbytes for x in jax.tree.leaves(params))
    ecfg = EngineConfig(slots=4, chunk=8, prefill_rows=2, page_size=8, num_pages=8, max_len=64)
    for name, m in (("disaggregated", mesh(devs[4:8], expert=2, tensor=2)),
                    ("colocated", mesh(devs[:4], expert=2, tensor=2)), ("unsharded", mesh(devs[4:5]))):
        eng = RolloutEngine(cfg, params, router, ecfg, m)
        for version in range(1, args.publishes + 1):
            new = jax.tree.map(lambda x, version=version: x + version, params)  # a new version on the trainer's mesh
            jax.block_until_ready(new)
            eng.update_weights(new, router, version)
        assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(jax.device_get(eng.params)),
                                                        jax.tree.leaves(jax.device_get(new))))
        s = float(np.median(eng.sync_s[1:]))  # the first placement compiles the reshard
        emit(part="sync", placement=name, engine_devices=len(eng.devices), param_bytes=nbytes,
             median_s=round(s, 5), first_s=round(eng.sync_s[0], 5), mb_per_s=round(nbytes / s / 1e6, 1),
             bit_exact=True)


def eta_part(args) -> None:
    """The embedded loop, disaggregated (trainer devices[0:4], rollout devices[4:8]), at η = 0, 1, 2."""
    from composer2_jax import schema
    from composer2_jax.data import tokenizer as tk
    from composer2_jax.env import Environment
    from composer2_jax.rl import orchestrator
    from composer2_jax.rl.records import Counters
    from composer2_jax.rl.services.env_worker import env_worker_for
    from composer2_jax.rl.services.local import LocalOrchestrator
    from composer2_jax.rl.services.rollout import RolloutWorker
    from composer2_jax.rl.services.testing import micro_model_config
    from composer2_jax.rl.services.weights import WeightStore
    from experiments import rl as rl_exp

    for eta in args.etas:
        c = rl_exp.get_config("toy")
        c.model = schema.to_config_dict(micro_model_config(vocab_size=272))
        c.rollout.num_draft = 0  # the micro model has no MTP depths to draft with
        c.workdir, c.init_from = tempfile.mkdtemp(prefix="rl_mesh_"), ""
        c.rl.update(backend="local", placement="disaggregated", eta=eta, steps=args.steps, groups_per_batch=2,
                    samples=2, eval_every=0, train_tasks=40)
        c.rl.loop.update(episode_threads=8, max_retries=2)
        c.env.pool_size = 2
        c.rollout.update(batch_size=4, prompt_len=192, max_new_tokens=24, first_device=4, devices=4,
                         mesh=schema.to_config_dict(shd.MeshConfig(fsdp=1, expert=2, tensor=2)))
        c.harness.update(max_new_tokens=24, summary_tokens=16, max_turns=2, context_budget=144)
        c.trainer.update(rows=8, seq_len=256, devices=4,
                         mesh=schema.to_config_dict(shd.MeshConfig(fsdp=2, expert=2)))
        run = orchestrator.rl_config(c)
        tokenizer = run.tokenizer.build()
        trainer = orchestrator.make_trainer(run, tokenizer)
        store, counters = WeightStore(), Counters()
        rollout = RolloutWorker(run.model, store, run.rollout, tokenizer.special_id(tk.IM_END), counters,
                                vocab_limit=trainer.law.vocab_limit)
        stamps = []
        with Environment(pool_size=run.env.pool_size, limits=orchestrator.sandbox_limits(run.env)) as env:
            orch = LocalOrchestrator(trainer, rollout, env_worker_for(run, env, tokenizer),
                                     orchestrator.training_curriculum(run), run.rl, store, counters)
            t0 = time.perf_counter()
            history = orch.run(lambda m: stamps.append(time.perf_counter()))
        episodes = [m["batch/episodes"] for m in history]
        rate = sum(episodes[1:]) / (stamps[-1] - stamps[0])  # versions 2..steps: compile excluded
        sync = [s for e in rollout.engines for s in e.sync_s]
        emit(part="eta", eta=eta, placement="disaggregated", versions=len(history), episodes_per_s=round(rate, 3),
             wall_s=round(time.perf_counter() - t0, 1), staleness_max=max(m["staleness_max"] for m in history),
             train_s_mean=round(float(np.mean([m["train_s"] for m in history[1:]])), 2),
             wait_s_mean=round(float(np.mean([m["wait_s"] for m in history[1:]])), 2),
             weight_sync_s_median=round(float(np.median(sync)), 5) if sync else None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=("engine", "sync", "eta"), default=None, help="run one part")
    ap.add_argument("--sessions", type=int, default=8, help="engine: decode slots = concurrent sessions")
    ap.add_argument("--tokens", type=int, default=32, help="engine: greedy tokens per session")
    ap.add_argument("--publishes", type=int, default=6, help="sync: versions published per placement")
    ap.add_argument("--steps", type=int, default=4, help="eta: versions trained per run")
    ap.add_argument("--etas", type=int, nargs="+", default=[0, 1, 2], help="eta: staleness bounds to run")
    args = ap.parse_args()
    emit(part="setup", devices=jax.device_count(), platform=jax.devices()[0].platform, cores=os.cpu_count(),
         jax=jax.__version__)
    parts = {"engine": engine_part, "sync": sync_part, "eta": eta_part}
    for name, fn in parts.items():
        if args.only in (None, name):
            fn(args)


if __name__ == "__main__":
    main()
