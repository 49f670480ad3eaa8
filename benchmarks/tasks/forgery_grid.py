"""Forging policies against every task kind, JSON lines: can a policy pass a hidden check without doing the task?

    python -m benchmarks.tasks.forgery_grid [--policies atexit,os_exit] [--tasks bug-config-equals,...] [--workers 4]
    python -m benchmarks.tasks.forgery_grid --generated runs/gen_pkg   (also every task of a folder from
    bench/authoring/)

Every policy of `composer2_jax.bench.authoring.forgeries` is applied to the starting repository of every task and the
result is graded by the real graders in real sandboxes: the RL toy family (`rl/tasks.py`) through the RL grader
(`rl/grading.py`) and as Harbor folders through the benchmark grader (`bench/grade.py`), and every task of
suite v0 through the benchmark grader (and, with `--generated DIR`, every task of that folder). One line per
grading, then one summary line per policy, then the table kept in docs/benchmark.md (passes out of tasks; every cell
must be 0). The `oracle` row applies the reference solution instead (every cell must be full) and the `null` row
grades the untouched repository.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from composer2_jax.bench.authoring import forgeries as forging
from composer2_jax.bench.grade import grade, pack_dir, unpack_command, upload_commands
from composer2_jax.bench.task import Task, load_suite
from composer2_jax.env import Environment, SandboxLimits
from composer2_jax.rl import tasks as rl_tasks
from composer2_jax.rl.grading import grade_task

HANG_TIMEOUT_S = 10.0  # the verifier timeout the `hang` policy is graded under (it would wait out any limit)
RL_TIMEOUT_S = 30.0  # the RL grader's check timeout (rl/services/env_worker.py's default)
BASELINES = ("oracle", "null")
KINDS = ("rl", "rl-harbor", "v0", "generated")  # the table's columns


def capped(task: Task, timeout_s: float) -> Task:
    """The task with its verifier timeout lowered to timeout_s."""
    return dataclasses.replace(task, config=dataclasses.replace(
        task.config, verifier_timeout_s=min(task.config.verifier_timeout_s, timeout_s)))


def solved_source(env, task: Task) -> str:
    """A sandbox on the task's repository after solution/solve.sh ran in it (as the oracle agent runs it)."""
    sid = env.create(task.repo_dir())
    blob = "/tmp/.solution.b64"
    for command in upload_commands(pack_dir(task.solution_dir), blob):
        env.call(sid, "run_terminal_cmd", {"command": command, "timeout": 60})
    obs = env.call(sid, "run_terminal_cmd", {"command": unpack_command(blob, "/tmp/solution") +
                                             " && cd /workspace && bash /tmp/solution/solve.sh", "timeout": 300})
    if obs.fields.get("exit_code") != 0:
        raise RuntimeError(f"solve.sh of {task.name} failed: {obs.content[:500]}")
    return sid


def agent_turn(env, snapshot: str, policy: str) -> str:
    """The source to grade: the snapshot itself, or for an agent-phase policy a sandbox forked from it in which the
    agent ran the policy's command (its background process still running when grading starts)."""
    command = forging.agent_command(policy)
    if command is None:
        return snapshot
    sid = env.fork(snapshot)
    obs = env.call(sid, "run_terminal_cmd", {"command": command, "timeout": 30})
    if "started" not in obs.fields.get("stdout", ""):
        env.close(sid)
        raise RuntimeError(f"the agent-phase policy {policy} did not start: {obs.content[:300]}")
    return sid


def grade_bench(env, task: Task, policy: str, work: Path, hang_s: float = HANG_TIMEOUT_S) -> dict:
    """Grade the task's repository after `policy` (a forging policy, or a baseline) with the benchmark grader."""
    if policy == "oracle":
        source = solved_source(env, task)
    else:
        repo = task.repo_dir(work / "cache")
        if policy != "null":
            repo = forging.forged_copy(repo, policy, work / f"bench-{task.name}-{policy}")
        source = agent_turn(env, env.import_repo(repo), policy)
    graded = capped(task, hang_s) if policy == "hang" else task
    try:
        g = grade(env, source, graded)
    finally:
        if policy == "oracle" or policy in forging.AGENT_PHASE:
            env.close(source)
    return {"reward": g.reward, "passed": g.passed, "error": g.error, "wall_s": round(g.wall_s, 2)}


def grade_rl(env, task: rl_tasks.CodingTask, policy: str, work: Path, hang_s: float = HANG_TIMEOUT_S) -> dict:
    """Grade a toy-family task's repository after `policy` with the RL grader."""
    repo = work / f"{task.task_id}-{policy}-src"
    files = task.fixed_files() if policy == "oracle" else task.files()
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    if policy not in BASELINES:
        repo = forging.forged_copy(repo, policy, work / f"{task.task_id}-{policy}")
    source = agent_turn(env, env.import_repo(repo), policy)
    try:
        g = grade_task(env, source, task, timeout_s=hang_s if policy == "hang" else RL_TIMEOUT_S)
    finally:
        if policy in forging.AGENT_PHASE:
            env.close(source)
    return {"reward": g.reward, "passed": g.reward >= 1.0, "error": g.error, "wall_s": round(g.wall_s, 2),
            "tests": dataclasses.asdict(g.tests)}


def jobs(policies: list[str], v0: list[Task], rl: list[rl_tasks.CodingTask], rl_suite: list[Task],
         generated: list[Task] = ()) -> list[tuple]:
    """(kind, task, policy) for every grading."""
    out = []
    for policy in policies:
        out += [("generated", t, policy) for t in generated]
        out += [("rl", t, policy) for t in rl]
        out += [("rl-harbor", t, policy) for t in rl_suite]
        out += [("v0", t, policy) for t in v0]
    return out


def run_one(env, work: Path, job: tuple) -> dict:
    """One grading as a JSON-ready row; an exception becomes the row's error (and no pass)."""
    kind, task, policy = job
    name = task.task_id if kind == "rl" else task.name
    start = time.monotonic()
    try:
        row = grade_rl(env, task, policy, work) if kind == "rl" else grade_bench(env, task, policy, work)
    except Exception as e:  # noqa: BLE001 - a crash of the harness is reported, not raised
        row = {"reward": 0.0, "passed": False, "error": f"{type(e).__name__}: {e}"}
    return {"bench": "forging", "kind": kind, "task": name, "policy": policy, **row,
            "total_s": round(time.monotonic() - start, 2)}


def summarize(rows: list[dict], policies: list[str]) -> list[dict]:
    """Per policy: passes out of gradings for each kind, and the tasks it passed."""
    out = []
    for policy in policies:
        mine = [r for r in rows if r["policy"] == policy]
        line = {"bench": "forging", "summary": policy}
        for kind in KINDS:
            k = [r for r in mine if r["kind"] == kind]
            line[kind] = f"{sum(r['passed'] for r in k)}/{len(k)}"
        line["passed_tasks"] = sorted(f"{r['kind']}:{r['task']}" for r in mine if r["passed"])
        out.append(line)
    return out


def table(summary: list[dict]) -> str:
    """The summary as a markdown table."""
    lines = ["| policy | RL toy (RL grader) | RL toy (Harbor folder) | suite v0 | generated |", "|---|---|---|---|---|"]
    lines += [f"| `{s['summary']}` | {s['rl']} | {s['rl-harbor']} | {s['v0']} | {s['generated']} |" for s in summary]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.tasks.forgery_grid", description=__doc__.splitlines()[0])
    p.add_argument("--policies", default=",".join((*forging.POLICIES, *BASELINES)), help="comma-separated")
    p.add_argument("--tasks", default="", help="v0 task names (comma-separated; default all)")
    p.add_argument("--rl-levels", default="0,1,2,3", help="one toy task per level")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--generated", default="", help="a folder of generated tasks to grade too (all of its tasks)")
    args = p.parse_args(argv)
    policies = [x for x in args.policies.split(",") if x]
    v0 = list(load_suite("v0").select([x for x in args.tasks.split(",") if x]).tasks)
    rl = [rl_tasks.make_task(7, int(lv)) for lv in args.rl_levels.split(",") if lv]
    generated = list(load_suite(args.generated).tasks) if args.generated else []
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Environment(limits=SandboxLimits(timeout_s=120), pool_size=4) as env:
        work = Path(tmp)
        rl_suite = [load_task_folder(rl_tasks.write_task_folder(t, work / "rl-suite")) for t in rl]
        with ThreadPoolExecutor(args.workers) as pool:
            for row in pool.map(lambda j: run_one(env, work, j), jobs(policies, v0, rl, rl_suite, generated)):
                rows.append(row)
                print(json.dumps(row), flush=True)
    summary = summarize(rows, policies)
    for line in summary:
        print(json.dumps(line), flush=True)
    print(table(summary), file=sys.stderr)
    return 0


def load_task_folder(path: Path) -> Task:
    """A task folder written by rl/tasks.py, loaded as a benchmark task."""
    from composer2_jax.bench.task import load_task

    task = load_task(path)
    assert isinstance(task, Task), task
    return task


if __name__ == "__main__":
    sys.exit(main())
