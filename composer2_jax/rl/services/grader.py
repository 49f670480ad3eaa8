"""Grading an RL episode: the hidden check runs in a fresh fork of the final workspace, copied in only then.

Same protocol as the benchmark's `bench/grade.py` (fork → install hidden tests under /tmp/tests → run from
/workspace with LOGS_DIR=/tmp/logs → read the verdict from outside the sandbox through /proc, never through a
symlink), in one command instead of three: RL grades every rollout, so the per-episode cost matters. The agent's
processes are gone in the fork and the check never existed in the workspace it could see or edit.
"""

from __future__ import annotations

import dataclasses
import json
import time

from composer2_jax.bench.grade import LOGS_DIR, TESTS_DIR, WORKSPACE, is_local, parse_reward, read_outside
from composer2_jax.rl.rewards import TestResult
from composer2_jax.rl.tasks import CHECK_NAME, CodingTask, check_source


@dataclasses.dataclass(frozen=True)
class GradeResult:
    """The verdict on one workspace."""

    tests: TestResult
    reward: float  # reward.txt of the check (1 iff every case passed)
    wall_s: float
    error: str | None = None  # why the check produced no verdict


def _install_and_run(task: CodingTask, timeout_s: float) -> str:
    """One shell command: write the check under TESTS_DIR, run it from the workspace."""
    source = check_source(task)
    if "__CHECK__" in source:
        raise ValueError(f"check of task {task.task_id} contains the heredoc marker")
    return (f"rm -rf {TESTS_DIR} {LOGS_DIR} && mkdir -p {TESTS_DIR} {LOGS_DIR}/verifier && "
            f"cat > {TESTS_DIR}/{CHECK_NAME} <<'__CHECK__'\n{source}__CHECK__\n"
            f"cd {WORKSPACE} && LOGS_DIR={LOGS_DIR} PYTHONDONTWRITEBYTECODE=1 timeout {int(timeout_s)} "
            f"python3 -I -S {TESTS_DIR}/{CHECK_NAME}")


def _read(env, sid: str, name: str) -> bytes | None:
    """A verifier file: from outside the sandbox when it is local, else through `cat` (remote environments)."""
    path = f"{LOGS_DIR}/verifier/{name}"
    if is_local(env, sid):
        return read_outside(env, sid, path)
    obs = env.call(sid, "run_terminal_cmd", {"command": f"cat {path}", "timeout": 10})
    return obs.fields.get("stdout", "").encode() if obs.ok and obs.fields.get("exit_code") == 0 else None


def grade_task(env, source: str, task: CodingTask, timeout_s: float = 30.0) -> GradeResult:
    """Run the task's hidden check on a fresh fork of `source` (sandbox or snapshot id); the fork is closed after."""
    start = time.monotonic()
    gid = env.fork(source)
    try:
        obs = env.call(gid, "run_terminal_cmd", {"command": _install_and_run(task, timeout_s),
                                                 "timeout": timeout_s + 5})
        if obs.error is not None and obs.error != "timeout":
            return GradeResult(TestResult(0, 0, 1), 0.0, time.monotonic() - start,
                               f"the check could not run: {obs.content[:300]}")
        reward, why = parse_reward(_read(env, gid, "reward.txt"), None)
        counts = _read(env, gid, "results.json")
        tests = TestResult.from_mapping(json.loads(counts)) if counts else TestResult(0, 0, 1)
    finally:
        env.close(gid)
    return GradeResult(tests, 0.0 if reward is None else reward, time.monotonic() - start, why)
