"""Verdicts outside the code's reach: the host side of the verdict runner (bench/verdict_runner.py).

A task of this project carries, in tests/: verdict_runner.py (a byte-identical copy of the canonical one),
check.json (what to ask the code under test), probes.py (child-side probes; no expected values), optionally
setup.py (parent-side fixtures), and expected.json (the hidden values). Its test.sh runs the runner from the
repository root. Under a third-party Harbor runner that is the whole story (the runner judges in the sandbox).
Under this project's graders (bench/grade.py, rl/services/grader.py) expected.json never enters the sandbox:
the grader installs tests/ without it, reads the answers the runner wrote ($LOGS_DIR/verifier/answers.json)
from outside the sandbox, and judges them here, in a process that never executes task code.

    python -m composer2_jax.bench.verdict sync                  # refresh every task's copy of the runner
    python -m composer2_jax.bench.verdict record TASK_DIR ...   # expected.json from the oracle's answers

docs/benchmark.md ("Verdicts") gives the file formats, the spec kinds and what a policy can and cannot forge.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import sys
from pathlib import Path
from typing import Any

from composer2_jax.bench import verdict_runner as vr

RUNNER = Path(vr.__file__).resolve()
GUARD = RUNNER.with_name("verifier_guard.py")  # installed as sitecustomize.py for every verifier
RUNNER_NAME = RUNNER.name
HOST_ONLY = (vr.EXPECTED,)  # files of tests/ the graders keep on the host
ANSWERS_LIMIT = 8 << 20  # most bytes of answers.json the host reads
TEST_SH = """#!/usr/bin/env bash
# Hidden verifier (Harbor layout), run from the repository root. The verdict runner runs the probes of probes.py
# against the repository in an isolated child interpreter that can only answer with values, and judges them
# against expected.json; the reward goes to $LOGS_DIR/verifier/reward.txt (Harbor: /logs/verifier/reward.txt).
# The project's graders keep expected.json on the host and judge the runner's answers.json there instead.
python3 -I -S "${TESTS_DIR:-/tests}/verdict_runner.py"
"""


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The host's judgement of one workspace's answers."""

    reward: float  # 1.0 iff every expected case passed
    passed: int
    failed: int  # answered, not matching
    errors: int  # not answered (the child exited, hung, crashed, or never got to it)
    cases: tuple[dict, ...]  # {"name", "status"} per expected case
    runs: dict  # the runner's record per run (status, answers, wall time)
    guards: dict  # which in-sandbox guards took effect (non-dumpable, subreaper, scrubbed)

    def summary(self) -> str:
        """One line per run and per case not passed (for the grade's output)."""
        lines = [f"verdict (judged on the host): reward {self.reward:g}, {self.passed} passed, {self.failed} failed, "
                 f"{self.errors} unanswered; guards {self.guards}"]
        lines += [f"run {n}: {r.get('status')}, {r.get('answered')} answers" for n, r in sorted(self.runs.items())]
        lines += [f"  {c['name']}: {c['status']}" for c in self.cases if c["status"] != "passed"][:50]
        return "\n".join(lines)


class VerdictError(ValueError):
    """A task's verdict files are malformed or stale; the message names the file and what was expected."""


def uses_runner(tests_dir: Path) -> bool:
    """True when the task's tests/ holds the verdict runner (its verdict is judged from answers)."""
    return (Path(tests_dir) / RUNNER_NAME).is_file()


def load_expected(tests_dir: Path) -> dict | None:
    """The task's expected values (None for a task without the runner); checks the runner copy is current."""
    tests_dir = Path(tests_dir)
    if not uses_runner(tests_dir):
        return None
    if (tests_dir / RUNNER_NAME).read_bytes() != RUNNER.read_bytes():
        raise VerdictError(f"{tests_dir / RUNNER_NAME} differs from {RUNNER}; run "
                           "`python -m composer2_jax.bench.verdict sync`")
    path = tests_dir / vr.EXPECTED
    if not path.is_file():
        raise VerdictError(f"{tests_dir}: the verdict runner is installed but {vr.EXPECTED} is missing; expected "
                           "the hidden values (`python -m composer2_jax.bench.verdict record TASK_DIR`)")
    try:
        expected = json.loads(path.read_text())
    except ValueError as e:
        raise VerdictError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(expected.get("probes"), dict) or not expected["probes"]:
        raise VerdictError(f"{path}: expected {{\"probes\": {{name: spec}}}} with at least one probe")
    return expected


def judge_answers(raw: bytes | None, expected: dict) -> tuple[Verdict | None, str | None]:
    """(verdict, None) from the bytes of answers.json, or (None, why) when there are none to judge."""
    if raw is None:
        return None, "the verdict runner wrote no answers.json (it was killed, or never ran)"
    try:
        doc = json.loads(raw)
        answers = doc["answers"]
        if not isinstance(answers, dict):
            raise TypeError(f"answers is a {type(answers).__name__}")
    except (ValueError, KeyError, TypeError) as e:
        return None, f"unreadable answers.json ({type(e).__name__}: {e})"
    v = vr.judge(answers, expected)
    runs = doc.get("runs") if isinstance(doc.get("runs"), dict) else {}
    guards = doc.get("guards") if isinstance(doc.get("guards"), dict) else {}
    return Verdict(v["reward"], v["passed"], v["failed"], v["errors"], tuple(v["cases"]), runs, guards), None


def guard_dir(tests_dir: str) -> str:
    """Where the graders put bench/verifier_guard.py as sitecustomize.py, beside a grading's tests dir."""
    return f"{tests_dir.rstrip('/').rpartition('/')[0]}/site"


def verifier_env(tests_dir: str, logs_dir: str) -> str:
    """Environment assignments for test.sh: Harbor's dirs, the runner's scrub switch, and interpreter guards for
    third-party verifiers: the guard first on PYTHONPATH (the workspace cannot shadow the standard library or a test
    runner), no user site, no bytecode written into the workspace."""
    return (f"TESTS_DIR={tests_dir} LOGS_DIR={logs_dir} VERDICT_SCRUB=1 PYTHONPATH={guard_dir(tests_dir)} "
            "PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1")


# ---------------------------------------------------------------------------------------------------- authoring


def task_dirs(root: Path) -> list[Path]:
    """Task folders under root (a suite, a folder of suites, or one task) whose tests/ hold the runner."""
    root = Path(root)
    return sorted(p.parent.parent for p in root.rglob(f"tests/{RUNNER_NAME}"))


def sync(root: Path) -> list[Path]:
    """Copy the canonical runner over every stale copy under root; the copies rewritten."""
    fresh = RUNNER.read_bytes()
    out = []
    for task in task_dirs(root):
        copy = task / "tests" / RUNNER_NAME
        if copy.read_bytes() != fresh:
            copy.write_bytes(fresh)
            out.append(copy)
    return out


def expected_from_answers(answers: dict[str, Any], check: dict) -> dict:
    """expected.json from an oracle's answers: exact values, except names matching a check.json `match` pattern
    ({glob: spec template}) take that template with the answer filled in (approx, sha256)."""
    import hashlib

    probes = {}
    for name in sorted(answers):
        value = answers[name]
        template = next((t for pattern, t in check.get("match", {}).items() if fnmatch.fnmatchcase(name, pattern)),
                        None)
        if template is None:
            probes[name] = {"value": value}
        elif "sha256" in template:
            probes[name] = {"sha256": hashlib.sha256(vr.canonical(value).encode()).hexdigest()}
        elif "approx" in template:
            probes[name] = {**template, "approx": value}
        else:
            probes[name] = {**template, "value": value}
    return {"version": vr.VERSION, "probes": probes}


def record_local(repo: Path, tests_dir: Path, python: str, timeout_s: float = 600.0) -> dict:
    """The runner's answers.json for `repo`, run on this host (no sandbox) with `python`, from a copy of tests_dir
    without expected.json; the children's temporary folders go to a tmpfs when there is one (/dev/shm), as in the
    sandbox, so directory listings come out in the same order. For generators whose code under test is trusted."""
    import shutil
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        tests, out = Path(tmp) / "tests", Path(tmp) / "out"
        shutil.copytree(tests_dir, tests, ignore=shutil.ignore_patterns(vr.EXPECTED, "__pycache__"))
        scratch = tempfile.mkdtemp(dir="/dev/shm" if Path("/dev/shm").is_dir() else None)
        try:
            run = subprocess.run([python, "-I", "-S", str(tests / RUNNER_NAME), "--out", str(out)], cwd=repo,
                                 capture_output=True, text=True, timeout=timeout_s, check=False,
                                 env={"PATH": "/usr/local/bin:/usr/bin:/bin", "TMPDIR": scratch, "LANG": "C.UTF-8"})
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if not (out / vr.ANSWERS).is_file():
            raise VerdictError(f"the runner wrote no answers for {repo}: {run.stdout[-2000:]}{run.stderr[-2000:]}")
        return json.loads((out / vr.ANSWERS).read_text())


def record(task_path: Path, env) -> dict:
    """Run the task's oracle in a sandbox of `env`, collect the runner's answers, write tests/expected.json; the
    answers.

    Items answered by setup.py's `expected(ctx)` (trusted values such as labels of generated logs) override the
    oracle's answers; everything else is the oracle's answer, so read the diff before committing it.
    """
    from composer2_jax.bench.task import load_task

    task = load_task(task_path)
    check = json.loads((task.tests_dir / vr.CHECK).read_text())
    answers, output = oracle_answers(env, task)
    if answers is None:
        raise VerdictError(f"{task.name}: the oracle's run wrote no answers:\n{output}")
    unfinished = {r: rec for r, rec in answers["runs"].items() if rec.get("status") != "done"}
    if unfinished:
        raise VerdictError(f"{task.name}: runs of the oracle did not finish: {unfinished}\n{output}")
    expected = expected_from_answers(answers["answers"], check)
    expected["probes"].update(trusted_expected(task.tests_dir))
    (task.tests_dir / vr.EXPECTED).write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")
    return answers


def oracle_answers(env, task) -> tuple[dict | None, str]:
    """(answers.json, verifier output) of the task's runner on its oracle-solved repository, in a sandbox."""
    from composer2_jax.bench.grade import pack_dir, read_verifier_files, run_verifier, unpack_command, upload_commands

    sid = env.create(task.repo_dir())
    try:
        blob = "/tmp/.solution.b64"
        for command in upload_commands(pack_dir(task.solution_dir), blob):
            env.call(sid, "run_terminal_cmd", {"command": command, "timeout": 60})
        solve = env.call(sid, "run_terminal_cmd", {"command": unpack_command(blob, "/tmp/solution") +
                                                   " && cd /workspace && bash /tmp/solution/solve.sh", "timeout": 600})
        if solve.fields.get("exit_code") != 0:
            raise VerdictError(f"{task.name}: solve.sh failed: {solve.content[:2000]}")
        gid = env.fork(sid)
        try:
            _, logs_dir, error = run_verifier(env, gid, task, HOST_ONLY)
            if error is not None:
                raise VerdictError(f"{task.name}: {error}")
            got, _, read_error = read_verifier_files(env, gid, logs_dir, (vr.ANSWERS, "test-output.txt"))
        finally:
            env.close(gid)
    finally:
        env.close(sid)
    output = (got["test-output.txt"] or b"").decode("utf-8", "replace")
    if read_error is not None or got[vr.ANSWERS] is None:
        return None, f"{read_error or ''}\n{output}"
    return json.loads(got[vr.ANSWERS]), output


def trusted_expected(tests_dir: Path) -> dict:
    """Expected specs computed by the task's setup.py `expected(ctx)` on the host (authoring only), else {}."""
    path = Path(tests_dir) / vr.SETUP
    if not path.is_file():
        return {}
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102 - our own task's setup, authoring
    if "expected" not in namespace:
        return {}
    return namespace["expected"]({"tests": str(tests_dir)})


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    p = argparse.ArgumentParser(prog="python -m composer2_jax.bench.verdict", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sync", help="refresh every task's copy of the runner")
    s.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parents[2] / "benchmarks" / "tasks"))
    r = sub.add_parser("record", help="write tests/expected.json from the oracle's answers")
    r.add_argument("tasks", nargs="+")
    r.add_argument("--workers", type=int, default=2, help="tasks recorded at once")
    args = p.parse_args(argv)
    if args.cmd == "sync":
        for path in sync(Path(args.root)):
            print(f"updated {path}")
        return 0
    from concurrent.futures import ThreadPoolExecutor

    from composer2_jax.env import Environment

    with Environment(pool_size=args.workers) as env, ThreadPoolExecutor(args.workers) as pool:
        for t, answers in zip(args.tasks, pool.map(lambda t: record(Path(t), env), args.tasks)):
            print(f"{t}: {len(answers['answers'])} answers recorded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
