"""Grading an RL episode: the hidden check runs in a fresh fork of the final workspace, copied in only then.

Same protocol as the benchmark's `bench/grade.py`, in one command instead of three and with the grader itself as
the runner's parent (`verdict.direct_run`): fork → write the runner and the child's request (not the expected
values) at a fresh random path → start the isolated child from an empty directory, answers to a file → read it
from outside the sandbox through /proc, never through a symlink → keep the lines with the nonce → judge them on the
host. RL grades every rollout, so the per-episode cost matters: one interpreter start, as before. The agent's
processes are gone in the fork, the check never existed in the workspace it could see or edit, and the code under
test only ever answers with values
(verify/verdict_runner.py): its exit status, output, files and patches are not part of the verdict.
"""

from __future__ import annotations

import dataclasses
import time

from composer2_jax.bench.grade import WORKSPACE, fresh_dirs, read_file
from composer2_jax.bench.grade import grade as harbor_grade
from composer2_jax.rl import pkg_tasks
from composer2_jax.rl.rewards import TestResult
from composer2_jax.rl.sources import HarborTask, family_module
from composer2_jax.rl.tasks import CodingTask
from composer2_jax.verify import verdict


@dataclasses.dataclass(frozen=True)
class GradeResult:
    """The verdict on one workspace."""

    tests: TestResult  # cases passed / failed / unanswered
    reward: float  # 1 iff every case passed
    wall_s: float
    error: str | None = None  # why the check produced no verdict


def grade_task(env, source: str, task: CodingTask | pkg_tasks.PkgTask, timeout_s: float = 30.0) -> GradeResult:
    """Run the task's hidden check on a fresh fork of `source` (sandbox or snapshot id); the fork is closed after.
    Both generated families (rl/tasks.py, rl/pkg_tasks.py): calls of their modules' functions, values judged here."""
    start = time.monotonic()
    family = family_module("pkg" if isinstance(task, pkg_tasks.PkgTask) else "toy")
    expected = family.expected_values(task)
    base = fresh_dirs()[0].rpartition("/")[0]
    run = verdict.direct_run(family.check_spec(task)["items"], WORKSPACE, base, timeout_s, site=False)  # stdlib
    gid = env.fork(source)
    try:
        obs = env.call(gid, "run_terminal_cmd", {"command": run.command, "timeout": timeout_s + 5})
        if obs.error is not None and obs.error != "timeout":
            return GradeResult(TestResult(0, 0, len(expected["probes"])), 0.0, time.monotonic() - start,
                               f"the check could not run: {obs.content[:300]}")
        try:
            raw = read_file(env, gid, run.answers_path, verdict.ANSWERS_LIMIT)
        except OSError as e:
            return GradeResult(TestResult(0, 0, len(expected["probes"])), 0.0, time.monotonic() - start,
                               f"refused to read the answers: {e}")
    finally:
        env.close(gid)
    judged = verdict.judge_direct(raw, run, expected)
    tests = TestResult(judged.passed, judged.failed, judged.errors)
    return GradeResult(tests, judged.reward, time.monotonic() - start, None)


def grade_harbor(env, source: str, task: HarborTask) -> GradeResult:
    """A Harbor task's verdict (bench/grade.py: its tests installed at fresh paths after the agent's turn, judged
    on the host for the project's own tasks) in a fresh fork of `source`, closed after. Pass/fail is one case."""
    start = time.monotonic()
    gid = env.fork(source)
    try:
        g = harbor_grade(env, gid, task.task, task.run_step() if task.step is not None else None)
    finally:
        env.close(gid)
    if g.error is not None:
        return GradeResult(TestResult(0, 0, 1), 0.0, time.monotonic() - start, g.error)
    tests = TestResult(1, 0) if g.passed else TestResult(0, 1)
    return GradeResult(tests, 1.0 if g.passed else 0.0, time.monotonic() - start, None)


def grade_episode(env, source: str, task, timeout_s: float = 30.0) -> GradeResult:
    """The verdict of any RL task (rl/sources.py) on a fresh fork of `source`: the toy check or the task's own."""
    if isinstance(task, HarborTask):
        return grade_harbor(env, source, task)
    if isinstance(task, (CodingTask, pkg_tasks.PkgTask)):
        return grade_task(env, source, task, timeout_s)
    raise TypeError(f"cannot grade {type(task).__name__} {task!r}; expected a CodingTask, PkgTask or HarborTask")
