"""Grading an RL episode: the hidden check runs in a fresh fork of the final workspace, copied in only then.

Same protocol as the benchmark's `bench/grade.py` (fork → install the verdict runner and the check, not the
expected values, at a fresh random path → run from /workspace → read the runner's answers from outside the
sandbox through /proc, never through a symlink → judge them on the host), in one command instead of three: RL
grades every rollout, so the per-episode cost matters. The agent's processes are gone in the fork, the check never
existed in the workspace it could see or edit, and the code under test only ever answers with values
(bench/verdict_runner.py): its exit status, output, files and patches are not part of the verdict.
"""

from __future__ import annotations

import dataclasses
import json
import time

from composer2_jax.bench import verdict
from composer2_jax.bench import verdict_runner as vr
from composer2_jax.bench.grade import WORKSPACE, fresh_dirs, read_verifier_files
from composer2_jax.rl.rewards import TestResult
from composer2_jax.rl.tasks import CodingTask, check_spec, expected_values

_RUNNER_SOURCE = verdict.RUNNER.read_text()


@dataclasses.dataclass(frozen=True)
class GradeResult:
    """The verdict on one workspace."""

    tests: TestResult  # cases passed / failed / unanswered
    reward: float  # 1 iff every case passed
    wall_s: float
    error: str | None = None  # why the check produced no verdict


def _heredoc(path: str, text: str, marker: str) -> str:
    """`cat > path` of text through a quoted heredoc (the marker must not occur in the text)."""
    if marker in text:
        raise ValueError(f"{path} contains the heredoc marker {marker}")
    return f"cat > {path} <<'{marker}'\n{text}{'' if text.endswith(chr(10)) else chr(10)}{marker}\n"


def install_and_run(task: CodingTask, timeout_s: float) -> tuple[str, str]:
    """(one shell command that installs the runner and the check at fresh dirs and runs it, the logs dir)."""
    tests_dir, logs_dir = fresh_dirs()
    check = json.dumps(check_spec(task, timeout_s=max(1.0, 0.8 * timeout_s)))
    command = (f"mkdir -p {tests_dir} {logs_dir}/verifier && "
               + _heredoc(f"{tests_dir}/{verdict.RUNNER_NAME}", _RUNNER_SOURCE, "__RUNNER__")
               + _heredoc(f"{tests_dir}/{vr.CHECK}", check, "__CHECK__")
               + f"cd {WORKSPACE} && {verdict.verifier_env(tests_dir, logs_dir)} timeout {int(timeout_s)} "
               f"python3 -I -S {tests_dir}/{verdict.RUNNER_NAME} > {logs_dir}/verifier/test-output.txt 2>&1")
    return command, logs_dir


def grade_task(env, source: str, task: CodingTask, timeout_s: float = 30.0) -> GradeResult:
    """Run the task's hidden check on a fresh fork of `source` (sandbox or snapshot id); the fork is closed after."""
    start = time.monotonic()
    expected = expected_values(task)
    gid = env.fork(source)
    try:
        command, logs_dir = install_and_run(task, timeout_s)
        obs = env.call(gid, "run_terminal_cmd", {"command": command, "timeout": timeout_s + 5})
        if obs.error is not None and obs.error != "timeout":
            return GradeResult(TestResult(0, 0, len(expected["probes"])), 0.0, time.monotonic() - start,
                               f"the check could not run: {obs.content[:300]}")
        got, _, read_error = read_verifier_files(env, gid, logs_dir, (vr.ANSWERS,))
    finally:
        env.close(gid)
    judged, why = verdict.judge_answers(got[vr.ANSWERS], expected) if read_error is None else (None, read_error)
    if judged is None:
        return GradeResult(TestResult(0, 0, len(expected["probes"])), 0.0, time.monotonic() - start, why)
    tests = TestResult(judged.passed, judged.failed, judged.errors)
    return GradeResult(tests, judged.reward, time.monotonic() - start, None)
