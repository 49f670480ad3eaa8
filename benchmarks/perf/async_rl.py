"""Asynchronous vs synchronous RL at equal compute on a long-tail rollout workload, JSON lines.

    python -m benchmarks.perf.async_rl                          (simulated workload, η = 0, 1, 2, 4; ~1 minute)
    python -m benchmarks.perf.async_rl --real runs/toy/rl/sft/checkpoints --real-steps 12   (the toy model, η = 0 / 2)

Simulated workload: the real embedded orchestrator (services/local.py: staleness gate, group buffer, episode
threads, trainer loop, weight publication) drives stand-ins for the JAX services. The rollout engine has `slots`
concurrent sequences (equal compute: the same slots in every run); an episode holds one slot for a latency drawn
from a lognormal with σ = --sigma (median --median-ms: a long tail, as agentic episodes have). The trainer step
takes --train-ms. Learning is modelled, not measured: a sample drawn from version v succeeds with probability
p(v) = 1 − (1 − p0)·e^(−q/τ) where q is the policy's accumulated progress, and each update adds
(1 − γ·mean staleness of its batch) to q (stale samples are assumed slightly less useful; γ = --stale-cost).
Reported per η: samples/s, speed-up over η = 0, wall time to a trailing batch reward ≥ --threshold, the final
reward (mean of the last 5 batches) and the staleness actually consumed.

--real runs experiments/rl.py's toy config from an SFT checkpoint with η = 0 and η = 2 for the same number of
versions on this machine's CPU, with plain and with tree groups (`--real-modes`), and reports samples/s, the
generated tokens per useful sample (records.useful_samples) and the held-out pass rate at the end of each.

--pinned runs the same toy config on the Ray backend with the trainer and the rollouts in separate processes pinned
to disjoint CPU cores (os.sched_setaffinity): the driver (trainer) on --trainer-core; Ray's processes (the rollout
actor with its own JAX device, the environment actors and their sandboxes, the evaluator) on --rollout-core. One
fresh process per η (`--pinned-etas`), each for --pinned-steps versions, reporting samples/s (all versions, and
versions 2.. without the compiles), held-out pass at the last version (equal versions across η), the cores each
process was pinned to, and the weight bytes sent per version vs full (with --pinned-deltas: as deltas).

    python -m benchmarks.perf.async_rl --pinned runs/bench_pinned/sft/checkpoints --pinned-steps 8
                                  (warm start first if that folder holds no checkpoint: ~3 min)
"""

from __future__ import annotations

import argparse
import json
import math
import random
import threading
import time

import numpy as np

from composer2_jax.data import tokenizer as tk
from composer2_jax.episode import Episode, Segment, Turn
from composer2_jax.rl.curriculum import TaskCurriculum
from composer2_jax.rl.records import Counters, EpisodeRecord, GroupRecord, summarize_groups
from composer2_jax.rl.run_config import LoopConfig, RLConfig
from composer2_jax.rl.services.local import LocalOrchestrator
from composer2_jax.rl.services.rollout import Generation
from composer2_jax.rl.services.weights import Weights, WeightStore
from composer2_jax.rl.tasks import task_set


class Progress:
    """The modelled policy quality: progress q per version, success probability p(q)."""

    def __init__(self, p0: float, tau: float, stale_cost: float):
        self.p0, self.tau, self.stale_cost = p0, tau, stale_cost
        self.q = {0: 0.0}

    def p(self, version: int) -> float:
        """Success probability of the policy at `version`."""
        return 1.0 - (1.0 - self.p0) * math.exp(-self.q[version] / self.tau)

    def update(self, version: int, mean_staleness: float) -> None:
        """Version + 1 from a batch whose samples lag by `mean_staleness` on average."""
        self.q[version + 1] = self.q[version] + max(0.0, 1.0 - self.stale_cost * mean_staleness)


class SlotRollout:
    """Stand-in rollout engine: `slots` concurrent sequences, each reply holds one for a long-tail latency."""

    def __init__(self, store: WeightStore, slots: int, median_s: float, sigma: float, seed: int):
        self.store, self.median_s, self.sigma = store, median_s, sigma
        self._slots = threading.Semaphore(slots)
        self._rng, self._lock = random.Random(seed), threading.Lock()
        self.thread: threading.Thread | None = None
        self.busy_s = 0.0

    def start(self, stop: threading.Event) -> threading.Thread:
        self.thread = threading.Thread(target=stop.wait, daemon=True, name="slots")
        self.thread.start()
        return self.thread

    def close(self, error: BaseException) -> None:
        """Nothing to release."""

    def generate(self, prompt: list[int], max_new_tokens: int) -> Generation:
        """Hold a slot for the episode's latency; stamped with the version current when generation started."""
        with self._lock:
            latency = self.median_s * self._rng.lognormvariate(0.0, self.sigma)
        with self._slots:
            version = self.store.version
            time.sleep(latency)
            with self._lock:
                self.busy_s += latency
        return Generation((1,), (-0.1,), version, None, None)


class SimEnvWorker:
    """Stand-in environment worker: one generation per episode; success ~ Bernoulli(p(version of the reply))."""

    def __init__(self, progress: Progress, seed: int):
        self.progress, self.tok = progress, tk.ByteTokenizer()
        self._rng, self._lock = random.Random(seed + 1), threading.Lock()

    def run(self, task, policy, admitted_version: int, routing_fn=None, checkpoint=None,
            checkpoints: bool = False) -> EpisodeRecord:
        """A one-turn episode graded by the modelled success probability (plain groups: no checkpoints)."""
        if checkpoint is not None or checkpoints:
            raise ValueError("the simulated workload runs plain groups only (rl.group_mode='plain')")
        c = policy.generate([0], 1)
        with self._lock:
            success = float(self._rng.random() < self.progress.p(c.policy_version))
        seg = Segment((Turn("system", (0,), False), Turn("message", c.ids, True, c.logprobs, c.policy_version)))
        return EpisodeRecord(Episode((seg,), success), [None], task.task_id, task.difficulty, success, success, 0.0,
                             {}, "submitted", 1, 0, 0, 1, 0.0, 0.0, admitted_version)


class SimTrainer:
    """Stand-in trainer: a fixed step time, the modelled progress update, the batch's reward and staleness."""

    def __init__(self, step_s: float, progress: Progress):
        self.step_s, self.progress, self.version = step_s, progress, 0
        self.model_cfg, self.num_moe = type("NoMoE", (), {"num_experts_per_tok": 1})(), 0

    def weights(self) -> Weights:
        return Weights(self.version, {}, {})

    def train(self, groups: list[GroupRecord]) -> dict:
        """Sleep the step time; progress += (1 − γ·staleness)."""
        lags = [self.version - e.min_version for g in groups for e in g.episodes]
        time.sleep(self.step_s)
        self.progress.update(self.version, float(np.mean(lags)))
        self.version += 1
        return {"staleness_mean": float(np.mean(lags)), "staleness_max": float(max(lags)),
                "batch/reward": summarize_groups(groups)["reward"]}


def simulate(eta: int, args) -> dict:
    """One simulated run; the per-η JSON line."""
    progress = Progress(args.p0, args.tau, args.stale_cost)
    store, counters = WeightStore(), Counters()
    rollout = SlotRollout(store, args.slots, args.median_ms / 1000, args.sigma, args.seed)
    trainer = SimTrainer(args.train_ms / 1000, progress)
    rl = RLConfig(eta=eta, samples=args.samples, steps=args.steps, groups_per_batch=args.groups,
                  loop=LoopConfig(episode_threads=args.slots * (eta + 2), max_retries=0, take_timeout_s=600))
    orch = LocalOrchestrator(trainer, rollout, SimEnvWorker(progress, args.seed), TaskCurriculum(task_set(64, 0)), rl,
                             store, counters)
    t0, times = time.monotonic(), []
    history = orch.run(on_version=lambda m: times.append(time.monotonic() - t0))
    wall = times[-1]
    rewards = [m["batch/reward"] for m in history]
    trailing = [float(np.mean(rewards[max(0, i - 2):i + 1])) for i in range(len(rewards))]
    hit = next((times[i] for i, r in enumerate(trailing) if r >= args.threshold), None)
    samples = args.steps * args.groups * args.samples
    return {"bench": "async_rl", "workload": "simulated", "eta": eta, "steps": args.steps, "samples": samples,
            "wall_s": round(wall, 3), "samples_per_s": round(samples / wall, 2),
            "time_to_threshold_s": None if hit is None else round(hit, 3), "threshold": args.threshold,
            "final_reward": round(float(np.mean(rewards[-5:])), 4), "final_p": round(progress.p(trainer.version), 4),
            "staleness_max": max(m["staleness_max"] for m in history),
            "staleness_mean": round(float(np.mean([m["staleness_mean"] for m in history])), 3),
            "slot_utilisation": round(rollout.busy_s / (args.slots * wall), 3)}


def real_run(eta: int, args, mode: str = "plain") -> dict:
    """experiments/rl.py toy from an SFT checkpoint for --real-steps versions in one group mode (tree: first_failure
    node choice, single-segment episodes); samples/s, generated tokens per useful sample and the final eval."""
    from composer2_jax.rl import orchestrator
    from experiments import rl as rl_exp

    c = rl_exp.get_config("toy")
    c.init_from, c.workdir = args.real, f"{args.real_workdir}/{mode}-eta{eta}"
    c.rl.update(eta=eta, steps=args.real_steps, eval_every=args.real_steps, plot=False, group_mode=mode)
    if mode == "tree":
        c.harness.update(max_summaries=0, context_budget=352)
        c.rl.tree.update(node_choice="first_failure", token_budget=args.tree_token_budget)
    c.checkpoint.every = 10**6
    r = orchestrator.run_rl(c)
    walls = [m["wait_s"] + m["train_s"] for m in r.history]
    samples = int(sum(m["batch/episodes"] for m in r.history))
    useful = sum(m["batch/useful_samples"] for m in r.history)
    ev = r.evals[-1]
    return {"bench": "async_rl", "workload": "toy-model", "mode": mode, "eta": eta, "steps": args.real_steps,
            "samples": samples, "wall_s": round(sum(walls), 1), "samples_per_s": round(samples / sum(walls), 3),
            "tokens_per_useful_sample": round(sum(m["batch/tokens_spent"] for m in r.history) / useful, 1)
            if useful else None,
            "final_batch_reward": round(float(np.mean([m["batch/reward"] for m in r.history[-3:]])), 4),
            "eval_pass_rate": round(ev["eval/pass_rate"], 4), "eval_reward": round(ev.get("eval/reward", 0.0), 4),
            "staleness_max": max(m["staleness_max"] for m in r.history)}


def pinned_child(eta: int, args) -> dict:
    """One η of --pinned, in this (fresh) process: Ray started on the rollout core, then the trainer on its own."""
    import os

    import ray

    os.sched_setaffinity(0, {args.rollout_core})  # Ray's processes (started now) inherit the rollout core
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    os.sched_setaffinity(0, {args.trainer_core})  # the driver: trainer (its JAX threads start after this)

    from composer2_jax.rl import orchestrator
    from experiments import rl as rl_exp

    c = rl_exp.get_config("toy")
    c.init_from, c.workdir = args.pinned, f"{args.real_workdir}/pinned-eta{eta}"
    c.rl.update(backend="ray", eta=eta, steps=args.pinned_steps, eval_every=args.pinned_steps, plot=False,
                eval_tasks=args.pinned_eval_tasks, eval_samples=1)
    c.rl.ray.update(rollout_actors=1, env_actors=2, rollout_host_devices=1, weight_deltas=args.pinned_deltas)
    c.checkpoint.every = 10**6
    cores: dict[str, list[int]] = {}
    stamps: list[float] = []

    def hook(m) -> None:
        stamps.append(time.perf_counter())
        if not cores:  # where every process runs (checked once the actors exist)
            cores["driver"] = sorted(os.sched_getaffinity(0))
            for a in ray._private.state.actors().values():
                if a["State"] == "ALIVE" and a["Pid"]:
                    cores[f"{a['ActorClassName']}:{a['Pid']}"] = sorted(os.sched_getaffinity(a["Pid"]))

    r = orchestrator.run_rl(c, hook=hook)
    ray.shutdown()
    episodes = [m["batch/episodes"] for m in r.history]
    walls = [m["wait_s"] + m["train_s"] for m in r.history]
    ev = r.evals[-1]
    versions = len(r.history)
    return {"bench": "async_rl", "workload": "toy-model-pinned", "eta": eta, "versions": versions,
            "samples": int(sum(episodes)), "samples_per_s": round(sum(episodes) / sum(walls), 3),
            "samples_per_s_after_v1": round(sum(episodes[1:]) / (stamps[-1] - stamps[0]), 3) if versions > 1
            else None,
            "eval_version": int(ev["eval/version"]), "eval_pass_rate": round(ev["eval/pass_rate"], 4),
            "staleness_max": max(m["staleness_max"] for m in r.history),
            "train_s_mean": round(float(np.mean([m["train_s"] for m in r.history])), 3),
            "wait_s_mean": round(float(np.mean([m["wait_s"] for m in r.history])), 3),
            "weight_publications": versions + 1,  # version 0 and one per update; the first always in full
            "weight_bytes_sent": r.counters.get("weight_bytes_sent", 0),
            "weight_bytes_full": r.counters.get("weight_bytes_full", 0),
            "weight_deltas": args.pinned_deltas, "cores": cores}


def pinned(args) -> list[dict]:
    """--pinned: the warm start if missing, then one fresh pinned process per η; rows with speed-ups over the first."""
    import os
    import subprocess
    import sys

    if len(os.sched_getaffinity(0)) < 2 or args.trainer_core == args.rollout_core:
        raise ValueError(f"--pinned needs two distinct cores; this process may use {sorted(os.sched_getaffinity(0))}"
                         f", --trainer-core={args.trainer_core}, --rollout-core={args.rollout_core}")
    from experiments import rl as rl_exp

    c = rl_exp.get_config("toy")
    c.init_from = args.pinned
    if args.pinned_sft_steps:  # a shorter warm start (a quick check of the mode, not a measurement)
        c.sft.update(steps=args.pinned_sft_steps, transcripts=8 * args.pinned_sft_steps)
    print(json.dumps({"bench": "async_rl", "warm_start": rl_exp.prepare(c)}), flush=True)
    rows = []
    for eta in (int(e) for e in args.pinned_etas.split(",")):
        flags = ["--pinned", args.pinned, "--real-workdir", args.real_workdir, "--pinned-steps", str(args.pinned_steps),
                 "--pinned-eval-tasks", str(args.pinned_eval_tasks), "--trainer-core", str(args.trainer_core),
                 "--rollout-core", str(args.rollout_core)] + ["--pinned-deltas"] * args.pinned_deltas
        out = subprocess.run([sys.executable, "-m", "benchmarks.perf.async_rl", *flags, "--pinned-child", str(eta)],
                             capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(f"pinned run at eta={eta} exited {out.returncode}: {out.stderr[-3000:]}")
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        rows[-1]["speedup_vs_first"] = round(rows[-1]["samples_per_s"] / rows[0]["samples_per_s"], 2)
        print(json.dumps(rows[-1]), flush=True)
    return rows


def parse_args(argv=None):
    """Command-line flags."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.perf.async_rl", description=__doc__.splitlines()[0])
    p.add_argument("--etas", default="0,1,2,4", help="staleness bounds to run")
    p.add_argument("--steps", type=int, default=40, help="weight versions per run")
    p.add_argument("--groups", type=int, default=8, help="groups per batch")
    p.add_argument("--samples", type=int, default=4, help="rollouts per group")
    p.add_argument("--slots", type=int, default=32, help="concurrent sequences of the rollout engine (equal compute)")
    p.add_argument("--median-ms", type=float, default=20.0, help="median episode latency")
    p.add_argument("--sigma", type=float, default=1.2, help="lognormal σ of the latency (the tail)")
    p.add_argument("--train-ms", type=float, default=60.0, help="trainer step time")
    p.add_argument("--p0", type=float, default=0.2, help="modelled initial success probability")
    p.add_argument("--tau", type=float, default=10.0, help="modelled learning time constant (versions)")
    p.add_argument("--stale-cost", type=float, default=0.05, help="modelled loss of update value per version lag")
    p.add_argument("--threshold", type=float, default=0.8, help="reward threshold of time-to-threshold")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--real", default="", help="an SFT checkpoint dir: also run the toy model with η = 0 and 2")
    p.add_argument("--real-steps", type=int, default=12, help="versions per toy-model run")
    p.add_argument("--real-workdir", default="runs/bench_async_rl", help="where the toy-model runs write")
    p.add_argument("--real-modes", default="plain,tree", help="group modes of the toy-model runs")
    p.add_argument("--tree-token-budget", type=int, default=600, help="tree mode: a group's generated tokens")
    p.add_argument("--pinned", default="", help="an SFT checkpoint dir (trained there if empty): run --pinned mode")
    p.add_argument("--pinned-etas", default="0,1,2", help="pinned: staleness bounds (one fresh process each)")
    p.add_argument("--pinned-steps", type=int, default=8, help="pinned: weight versions per run")
    p.add_argument("--pinned-eval-tasks", type=int, default=32, help="pinned: held-out tasks at the last version")
    p.add_argument("--pinned-sft-steps", type=int, default=0, help="pinned: warm-start steps (0 = the toy's)")
    p.add_argument("--pinned-deltas", action="store_true", help="pinned: send versions 1.. as weight deltas")
    p.add_argument("--pinned-child", type=int, default=None, help=argparse.SUPPRESS)  # one η, in a fresh process
    p.add_argument("--trainer-core", type=int, default=0, help="pinned: the trainer process's core")
    p.add_argument("--rollout-core", type=int, default=1, help="pinned: the core of every other process")
    return p.parse_args(argv)


def main(argv=None) -> list[dict]:
    """Print one JSON line per run, then the speed-ups over η = 0."""
    args = parse_args(argv)
    if args.pinned_child is not None:
        row = pinned_child(args.pinned_child, args)
        print(json.dumps(row), flush=True)
        return [row]
    if args.pinned:
        return pinned(args)
    rows = [simulate(int(e), args) for e in args.etas.split(",")]
    base = next((r for r in rows if r["eta"] == 0), rows[0])
    for r in rows:
        r["speedup_vs_sync"] = round(r["samples_per_s"] / base["samples_per_s"], 2)
        print(json.dumps(r), flush=True)
    if args.real:
        for mode in args.real_modes.split(","):
            real = [real_run(e, args, mode) for e in (0, 2)]
            for r in real:
                r["speedup_vs_sync"] = round(r["samples_per_s"] / real[0]["samples_per_s"], 2)
                print(json.dumps(r), flush=True)
            rows += real
    return rows


if __name__ == "__main__":
    main()
