"""Validate a suite: per task the oracle scores 1, the untouched repository (null agent) 0, every negative 0.

Run:   python -m composer2_jax.bench.validate --suite v1                  (every task)
       python -m composer2_jax.bench.validate --suite v1 --tasks NAME,... (some)
Exit:  0 when every task holds; 1 when one does not (each failure named); 2 on bad arguments.

Every trial goes through the runner as an agent's would (bench/runner.run_trial: a fresh fork of the task's
snapshot, the harness, the grader), so a negative is judged exactly like a model's final workspace. A negative
that does not apply to the starting repository is a failure of the task (a patch that changes nothing would
score 0 for the wrong reason), checked on the host with `patch --dry-run` before any sandbox runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from composer2_jax.bench import policies
from composer2_jax.bench.authoring.negatives import negative_factory, negatives
from composer2_jax.bench.runner import SnapshotCache, Trial, run_trial
from composer2_jax.bench.task import Suite, Task, load_suite
from composer2_jax.data import tokenizer as tk
from composer2_jax.env.harness import HarnessConfig

MIN_NEGATIVES = 3  # wrong-but-plausible patches every task of a validated suite ships


@dataclasses.dataclass
class TaskValidation:
    """One task's validation: the reward of every run and what is wrong (empty when the task holds)."""

    task: str
    rewards: dict[str, float | None] = dataclasses.field(default_factory=dict)  # "oracle", "null", "negative:NAME"
    problems: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def patch_applies(patch: Path, repo: Path) -> str | None:
    """None when `patch -p1` applies cleanly to repo (dry run, nothing written); else patch's complaint."""
    r = subprocess.run(["patch", "-p1", "--dry-run", "--batch", "-d", str(repo), "-i", str(patch)],
                       capture_output=True, text=True, timeout=60, check=False)
    return None if r.returncode == 0 else (r.stdout + r.stderr).strip()[-500:]


def static_problems(task: Task, cache_dir: Path | None = None) -> list[str]:
    """What is wrong with a task before anything runs: too few negatives, a negative that does not apply."""
    found = negatives(task)
    problems = [] if len(found) >= MIN_NEGATIVES else [
        f"{len(found)} negatives in tests/negatives/; expected at least {MIN_NEGATIVES}"]
    repo = task.repo_dir(cache_dir)
    for name, patch in found.items():
        why = patch_applies(patch, repo)
        if why is not None:
            problems.append(f"negative {name} does not apply to the starting repository: {why}")
    return problems


def judge(task: str, trials: dict[str, Trial]) -> TaskValidation:
    """The validation of one task from its trials keyed by run ("oracle", "null", "negative:NAME")."""
    out = TaskValidation(task, {k: t.reward for k, t in trials.items()})
    for run, t in trials.items():
        if t.error or t.grade_error:
            out.problems.append(f"{run}: {t.error or t.grade_error}")
        elif run == "oracle" and not (t.passed and t.reward == 1.0):
            out.problems.append(f"oracle scores {t.reward}; expected 1")
        elif run != "oracle" and t.reward != 0.0:
            out.problems.append(f"{run} scores {t.reward}; expected 0")
    return out


def validate(env, suite: Suite, workers: int = 3, config: HarnessConfig = HarnessConfig(max_turns=50),
             cache_dir: Path | None = None) -> list[TaskValidation]:
    """Validate every task of a suite (static checks, then oracle, null and each negative in parallel sandboxes)."""
    tok = tk.ByteTokenizer()
    static = {t.name: static_problems(t, cache_dir) for t in suite.tasks}
    jobs = []
    for task in suite.tasks:
        jobs += [(task, "oracle", policies.make_agent("oracle", config, tok)),
                 (task, "null", policies.make_agent("null", config, tok))]
        jobs += [(task, f"negative:{n}", policies.Agent(n, negative_factory(n, tok, config), tok, config))
                 for n in negatives(task)]
    snaps = SnapshotCache(env, cache_dir)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="validate") as pool:
        futures = [(task.name, run, pool.submit(run_trial, env, snaps, task, 0, agent))
                   for task, run, agent in jobs]
        trials: dict[str, dict[str, Trial]] = {}
        for name, run, f in futures:
            trials.setdefault(name, {})[run] = f.result()
    results = []
    for task in suite.tasks:
        v = judge(task.name, trials[task.name])
        v.problems[:0] = static[task.name]
        results.append(v)
    return results


def table(results: list[TaskValidation]) -> str:
    """A Markdown table: task, oracle, null, negatives (passed of scored 0), verdict."""
    lines = ["| task | oracle | null | negatives at 0 | holds |", "|---|---|---|---|---|"]
    for v in results:
        negs = {k: r for k, r in v.rewards.items() if k.startswith("negative:")}
        zero = sum(r == 0.0 for r in negs.values())
        lines.append(f"| `{v.task}` | {v.rewards.get('oracle')} | {v.rewards.get('null')} | {zero}/{len(negs)} | "
                     f"{'yes' if v.ok else 'NO'} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Validate the suite; print the table and every problem; exit 1 when a task does not hold."""
    p = argparse.ArgumentParser(prog="python -m composer2_jax.bench.validate", description=__doc__.splitlines()[0])
    p.add_argument("--suite", default="v1", help="suite version under benchmarks/tasks/, or a folder of tasks")
    p.add_argument("--tasks", default="", help="comma-separated task names (default: every task)")
    p.add_argument("--workers", type=int, default=3, help="trials run in parallel")
    args = p.parse_args(argv)
    try:
        suite = load_suite(args.suite).select([t for t in args.tasks.split(",") if t])
    except (KeyError, FileNotFoundError) as e:
        print(f"validate: {e.args[0]}", file=sys.stderr)
        return 2
    from composer2_jax.env import Environment, SandboxLimits
    with Environment(pool_size=min(args.workers, 8), limits=SandboxLimits(timeout_s=600)) as env:
        results = validate(env, suite, args.workers)
    print(table(results))
    bad = [v for v in results if not v.ok]
    for v in bad:
        print(f"{v.task}: " + "; ".join(v.problems), file=sys.stderr)
    print(f"{len(results) - len(bad)} of {len(results)} tasks hold (oracle 1, null 0, every negative 0)")
    return int(bool(bad) or not results)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
