"""RL soak: many versions of the embedded loop with real sandboxes; what a leak would grow, at start and end.

    python -m benchmarks.perf.rl_soak [--versions 500] [--every 50] [--groups 2] [--samples 3]

The loop of rl/services/local.py with scripted rollouts (services/testing.ScriptedRollout: correct or wrong edits
at a fixed rate, through the real tool calls), a counting trainer (no model: the loop, not the math, is soaked) and
a synchronous orbax checkpoint of a 1 MiB state every 10 versions, on the toy task family in real sandboxes (every
episode a fresh fork, graded in a fork of its own). One JSON line per sample: the start (version 0: services and
pools are up, nothing in flight), one per --every versions (episodes in flight), one once the loop has stopped
(pool refilled, nothing in flight), one after shutdown, then a summary naming every resource that grew between the
start and the stopped row:
  fds       open file descriptors of this process
  threads   Python threads of this process
  mounts    lines of this process's /proc/self/mountinfo (the host's mount namespace)
  sandboxes live sandboxes of the environment, and sandbox processes (host processes in other pid namespaces whose
            parent chain reaches this process)
  cgroups   cgroup directories under this environment's parent groups
  rss_mib   resident set size of this process
  layers_mib the environment's layer store on disk
"""

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from composer2_jax.data import tokenizer as tk
from composer2_jax.env import Environment, SandboxLimits
from composer2_jax.env.budget import tree_bytes
from composer2_jax.env.harness import HarnessConfig
from composer2_jax.rl import tasks
from composer2_jax.rl.curriculum import TaskCurriculum
from composer2_jax.rl.records import Counters
from composer2_jax.rl.rewards import RewardConfig
from composer2_jax.rl.run_config import LoopConfig, RLConfig
from composer2_jax.rl.services.env_worker import EnvWorker
from composer2_jax.rl.services.local import LocalOrchestrator
from composer2_jax.rl.services.testing import CountingTrainer, ScriptedRollout
from composer2_jax.rl.services.weights import WeightStore
from composer2_jax.train.checkpoint import Checkpointer

HARNESS = HarnessConfig(max_turns=4, max_new_tokens=192, max_total_tokens=1024, context_budget=352,
                        summary_tokens=64, system_prompt="Fix the bug.", summary_prompt="Summarize your progress.")
TOOLS = ("read_file", "edit_file", "submit")
GROWTH_KEYS = ("fds", "threads", "mounts", "sandboxes", "sandbox_processes", "cgroups")


def _descendants(root: int) -> list[int]:
    """Host pids whose parent chain reaches root."""
    parent = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            parent[int(name)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    out = []
    for pid in parent:
        p, seen = pid, 0
        while p in parent and p != root and seen < 64:
            p, seen = parent[p], seen + 1
        if p == root and pid != root:
            out.append(pid)
    return out


def sample(env: Environment, cgroup_parents: set[str], version: int, counters: Counters) -> dict:
    """One row of resource counts."""
    own_pidns = os.stat("/proc/self/ns/pid").st_ino
    sandbox_procs = 0
    for pid in _descendants(os.getpid()):
        try:
            sandbox_procs += os.stat(f"/proc/{pid}/ns/pid").st_ino != own_pidns
        except OSError:
            continue
    rss = next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
               if line.startswith("VmRSS:"))
    c = counters.snapshot()
    return {"metric": "rl_soak", "version": version, "fds": len(os.listdir("/proc/self/fd")),
            "threads": threading.active_count(),
            "mounts": len(Path("/proc/self/mountinfo").read_text().splitlines()),
            "sandboxes": len(env.sandboxes()) if not env._shut else 0, "sandbox_processes": sandbox_procs,
            "cgroups": sum(len(os.listdir(p)) for p in cgroup_parents if os.path.isdir(p)),
            "rss_mib": round(rss / 1024, 1), "layers_mib": round(tree_bytes(env.rt.layers.root) / 2**20, 2),
            "episodes_done": c.get("episodes_done", 0), "episode_failures": c.get("episode_failures", 0),
            "time": round(time.time(), 1)}


def settled(env: Environment, parents: set[str], version: int, counters: Counters, like: dict | None,
            wait_s: float = 20.0) -> dict:
    """A sample once the warm pool has refilled and no episode is in flight (at most wait_s): the start and end rows
    compare quiescent states (mid-run rows count the sandboxes of episodes in flight)."""
    deadline = time.monotonic() + wait_s
    row = sample(env, parents, version, counters)
    while time.monotonic() < deadline:
        time.sleep(1.0)
        again = sample(env, parents, version, counters)
        steady = all(again[k] == row[k] for k in GROWTH_KEYS)
        row = again
        if steady and (like is None or all(row[k] <= like[k] for k in GROWTH_KEYS)):
            break
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--versions", type=int, default=500)
    ap.add_argument("--every", type=int, default=50, help="a sample every N versions")
    ap.add_argument("--groups", type=int, default=2)
    ap.add_argument("--samples", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rl-soak-"))
    env = Environment(pool_size=4, limits=SandboxLimits(timeout_s=30))
    probe = env.create()  # the cgroup parents of this environment (none when the host offers no cgroups)
    parents = {os.path.dirname(d) for d in env.info(probe)["cgroups"]}
    env.close(probe)
    store, counters = WeightStore(), Counters()
    trainer = CountingTrainer(1)
    worker = EnvWorker(env, tk.ByteTokenizer(), HARNESS, RewardConfig(), TOOLS, schemas_in_prompt=False,
                       repo_root=work / "repos")
    rl = RLConfig(eta=1, samples=args.samples, steps=args.versions, groups_per_batch=args.groups,
                  loop=LoopConfig(episode_threads=8, max_retries=1, take_timeout_s=300))
    orch = LocalOrchestrator(trainer, ScriptedRollout(store, p_correct=0.6, seed=0), worker,
                             TaskCurriculum(tasks.task_set(40, 0)), rl, store, counters)
    ckpt = Checkpointer(work / "ckpt", max_to_keep=2, async_save=False)
    state = {"w": np.zeros((512, 512), np.float32)}
    rows = []

    def on_version(m: dict) -> None:
        v = int(m["version"])
        trainer.consumed.clear()  # the counting trainer keeps every batch for tests; a soak must not
        if v % 10 == 0:
            state["w"] += 1
            ckpt.save(v, state, {"version": v})
        if v % args.every == 0:
            rows.append(sample(env, parents, v, counters))
            print(json.dumps(rows[-1]), flush=True)

    start = settled(env, parents, 0, counters, None)
    print(json.dumps(start), flush=True)
    t0 = time.monotonic()
    orch.run(on_version)
    wall = time.monotonic() - t0
    ckpt.close()
    end = settled(env, parents, args.versions, counters, start) | {"loop_stopped": True}
    print(json.dumps(end), flush=True)
    env.shutdown()
    after = sample(env, parents, args.versions, counters) | {"after_shutdown": True}
    print(json.dumps(after), flush=True)
    grew = {k: [start[k], end[k]] for k in GROWTH_KEYS if end[k] > start[k]}
    print(json.dumps({"metric": "rl_soak_summary", "versions": args.versions, "wall_s": round(wall),
                      "episodes_done": end["episodes_done"], "start": {k: start[k] for k in (*GROWTH_KEYS, "rss_mib")},
                      "end": {k: end[k] for k in (*GROWTH_KEYS, "rss_mib")}, "grew": grew,
                      "rss_growth_mib": round(end["rss_mib"] - start["rss_mib"], 1),
                      # from the first mid-run sample: lazy imports and first-use allocations (orbax, jax) are done
                      "rss_growth_after_first_sample_mib": round(end["rss_mib"] - rows[0]["rss_mib"], 1) if rows
                      else None}), flush=True)


if __name__ == "__main__":
    main()
