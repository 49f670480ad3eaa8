"""RL episodes on image tasks beside workspace tasks, JSON lines: episodes/s and sandbox seconds per episode.

    python -m benchmarks.perf.rl_image_episodes [--episodes 16] [--threads 4] [--agent oracle]

One process, one Environment, the same EnvWorker path RL uses (rl/services/env_worker.py): per episode a fork of the
task's snapshot (image tasks: rl/image_tasks.py, every service of a compose task started on its private network), a
scripted episode through the harness (--agent: oracle = solution/solve.sh as terminal tool calls, null = submit at
once; no model, so the figures are the sandboxes' and the grader's cost, not inference), grading in a fork, close.
Three tasks, measured one after the other in the same run:
- workspace: suite v0's bug-config-equals (a repository in a workspace sandbox),
- image: tests/data/harbor/http-service (ubuntu:24.04 stand-in + python3, curl, pytest; a service the verifier starts),
- compose: the two-service task of tests/test_bench_compose.py (a key-value service with a healthcheck + main).
Each task gets one warm-up episode first (image build or cache hit, snapshot import); then --episodes episodes on
--threads threads. Rows: episodes_per_s (episodes / wall), and per episode the sandbox seconds (EnvWorker.run's wall:
fork, tool calls, grading, close), the grading seconds, and the open seconds (fork of the start snapshot, /logs,
healthchecks, until the agent could start; image tasks only, measured alone in a second pass of --episodes opens).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from composer2_jax.bench.policies import scripted_factory
from composer2_jax.bench.runner import step_view
from composer2_jax.data import tokenizer as tk
from composer2_jax.env import Environment, SandboxConfig, SandboxLimits
from composer2_jax.env.harness import HarnessConfig
from composer2_jax.env.tool_schemas import TOOL_NAMES
from composer2_jax.rl import sources
from composer2_jax.rl.rewards import RewardConfig
from composer2_jax.rl.services.env_worker import EnvWorker

ROOT = Path(__file__).resolve().parents[1]
HARBOR = ROOT / "tests" / "data" / "harbor"
TOK = tk.ByteTokenizer()
CFG = HarnessConfig(max_turns=8, max_new_tokens=32_768, max_total_tokens=200_000, context_budget=65_536)


def tasks(root: Path) -> dict[str, sources.HarborTask]:
    """The three benchmark tasks by kind (the image and compose ones copied into root)."""
    import shutil

    from tests.test_bench_compose import compose_task

    shutil.copytree(HARBOR / "http-service", root / "http-service")
    compose_task(root, "kv")
    images = {t.task.name: t for t in sources.harbor_tasks(sources.SourceSpec("suite", "img", 1.0), root, "train",
                                                           0.0).tasks}
    v0 = {t.task.name: t for t in sources.harbor_tasks(sources.SourceSpec("suite", "v0", 1.0), "v0", "train",
                                                       0.0).tasks}
    return {"workspace": v0["bug-config-equals"], "image": images["http-service"], "compose": images["kv"]}


def episode(worker: EnvWorker, task: sources.HarborTask, agent: str) -> tuple[float, float, float]:
    """(wall seconds, grading seconds, success) of one scripted episode."""
    policy = scripted_factory(agent, TOK, CFG)(step_view(task.task, task.run_step()))
    t = time.perf_counter()
    record = worker.run(task, policy, admitted_version=0)
    return time.perf_counter() - t, record.grade_s, record.success


def measure(worker: EnvWorker, kind: str, task: sources.HarborTask, args) -> dict:
    """One row: warm-up, then --episodes episodes on --threads threads."""
    t = time.perf_counter()
    episode(worker, task, args.agent)
    warmup = time.perf_counter() - t
    start = time.perf_counter()
    with ThreadPoolExecutor(args.threads) as pool:
        runs = list(pool.map(lambda _: episode(worker, task, args.agent), range(args.episodes)))
    wall = time.perf_counter() - start
    walls, grades, wins = zip(*runs)
    row = {"bench": "rl_image_tasks", "kind": kind, "task": task.task.name, "agent": args.agent,
           "episodes": args.episodes, "threads": args.threads, "wall_s": round(wall, 3),
           "episodes_per_s": round(args.episodes / wall, 3),
           "sandbox_s_per_episode": round(statistics.fmean(walls), 3),
           "sandbox_s_p50": round(statistics.median(walls), 3),
           "grade_s_per_episode": round(statistics.fmean(grades), 3),
           "success": round(statistics.fmean(wins), 3), "warmup_s": round(warmup, 3)}
    if task.task.is_image:
        opens = []
        images = worker.images()
        for _ in range(args.episodes):
            t = time.perf_counter()
            opened = images.open(task.task, task.step)
            opens.append(time.perf_counter() - t)
            images.close(opened)
        row.update(open_s_p50=round(statistics.median(opens), 4), open_s_mean=round(statistics.fmean(opens), 4))
    return row


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=16, help="timed episodes per task")
    ap.add_argument("--threads", type=int, default=4, help="episodes in flight")
    ap.add_argument("--agent", default="oracle", choices=("oracle", "null"))
    ap.add_argument("--kinds", default="workspace,image,compose", help="which rows, comma-separated")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="rl-image-bench-") as tmp, \
            Environment(config=SandboxConfig(image_pool_size=args.threads, pool_size=args.threads),
                        limits=SandboxLimits(timeout_s=120)) as env:
        worker = EnvWorker(env, TOK, CFG, RewardConfig(penalty_coef=0.0), TOOL_NAMES, repo_root=Path(tmp) / "repos")
        by_kind = tasks(Path(tmp) / "suite")
        for kind in args.kinds.split(","):
            row = measure(worker, kind, by_kind[kind], args)
            print(json.dumps(row), flush=True)
            rows.append(row)
        worker.close()
    return rows


if __name__ == "__main__":
    main()
