"""Verdicts outside the code's reach: the host side of the verdict runner (verify/verdict_runner.py).

A task of this project carries, in tests/: verdict_runner.py (a byte-identical copy of the canonical one),
check.json (what to ask the code under test), probes.py (child-side probes; no expected values), optionally
setup.py (parent-side fixtures), and expected.json (the hidden values). Its test.sh runs the runner from the
repository root. Under a third-party Harbor runner that is the whole story (the runner judges in the sandbox).
Under this project's graders (bench/grade.py, rl/grading.py) expected.json never enters the sandbox:
the grader installs tests/ without it, reads the answers the runner wrote ($LOGS_DIR/verifier/answers.json)
from outside the sandbox, and judges them here, in a process that never executes task code.

Authoring (refreshing the runner's copies, recording hidden values) is bench/authoring/record.py.

docs/benchmark.md ("Verdicts") gives the file formats, the spec kinds and what a policy can and cannot forge.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from composer2_jax.verify import verdict_runner as vr

RUNNER = Path(vr.__file__).resolve()
GUARD = RUNNER.with_name("guard.py")  # installed as sitecustomize.py for every verifier
RUNNER_NAME = RUNNER.name
HOST_ONLY = (vr.EXPECTED, "negatives")  # what of tests/ the graders keep on the host (hidden values, negatives)
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
                           "`python -m composer2_jax.bench.authoring.record sync`")
    path = tests_dir / vr.EXPECTED
    if not path.is_file():
        raise VerdictError(f"{tests_dir}: the verdict runner is installed but {vr.EXPECTED} is missing; expected "
                           "the hidden values (`python -m composer2_jax.bench.authoring.record record TASK_DIR`)")
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


@dataclasses.dataclass(frozen=True)
class DirectRun:
    """One child of the runner started by the grader itself, which is then its parent (see `direct_run`)."""

    command: str  # the shell command to run in the sandbox
    nonce: str  # what the child's answer lines must carry
    names: frozenset  # the answer names asked
    answers_path: str  # where the child's answer lines go (read from outside the sandbox)


def direct_run(items: list[dict], workspace: str, base: str, timeout_s: float, site: bool = True) -> DirectRun:
    """A child of the runner with the grader as its parent: for checks with one run and no setup.py (the RL toy
    family), where the in-sandbox parent would only add an interpreter start per grading.

    The command writes the runner and the request into a fresh folder `base`, then starts the child as the parent
    does (`-I -B`, an empty working directory, a clean environment, a private HOME; `site=False` adds `-S` for code
    that needs no site-packages, saving the site import) with its answers on fd 3 redirected to a file; the grader
    reads that file from outside and keeps the lines carrying the nonce. The expected values never enter the
    sandbox; processes the child leaves behind die with the grading fork.
    """
    import secrets

    nonce = secrets.token_hex(16)
    request = json.dumps({"nonce": nonce, "workspace": workspace, "items": items, "fixture": {},
                          "probes_source": "", "support": {}})
    home, answers = f"{base}/home", f"{base}/answers.lines"
    env = (f"env -i PATH=/usr/local/bin:/usr/bin:/bin HOME={home} TMPDIR={home} LANG=C.UTF-8 LC_ALL=C.UTF-8 "
           "PYTHONDONTWRITEBYTECODE=1")
    command = (f"mkdir -p {home}/work && chmod 700 {home} && "
               + _heredoc(f"{base}/{RUNNER_NAME}", RUNNER.read_text(), "__RUNNER__")
               + _heredoc(f"{home}/request.json", request + "\n", "__REQUEST__")
               + f"cd {home}/work && {env} timeout -s KILL {max(1, int(timeout_s))} "
               f"python3 -I -B{'' if site else ' -S'} "
               f"{base}/{RUNNER_NAME} --child 3 3> {answers} > {base}/output.txt 2>&1; true")
    return DirectRun(command, nonce, frozenset(vr.names_of(items)), answers)


def _heredoc(path: str, text: str, marker: str) -> str:
    """`cat > path` of text through a quoted heredoc (the marker must not occur in the text)."""
    if marker in text:
        raise ValueError(f"{path} contains the heredoc marker {marker}")
    return f"cat > {path} <<'{marker}'\n{text}{'' if text.endswith(chr(10)) else chr(10)}{marker}\n"


def judge_direct(raw: bytes | None, run: DirectRun, expected: dict) -> Verdict:
    """The verdict on a direct run's answer lines (none at all: every case unanswered)."""
    answers, done = vr.parse_answers(raw or b"", run.nonce, set(run.names))
    v = vr.judge(answers, expected)
    record = {"status": "done" if done else "no done line", "answered": len(answers)}
    return Verdict(v["reward"], v["passed"], v["failed"], v["errors"], tuple(v["cases"]), {"direct": record},
                   {"parent": "grader"})


def guard_dir(tests_dir: str) -> str:
    """Where the graders put verify/guard.py as sitecustomize.py, beside a grading's tests dir."""
    return f"{tests_dir.rstrip('/').rpartition('/')[0]}/site"


def verifier_env(tests_dir: str, logs_dir: str) -> str:
    """Environment assignments for test.sh: Harbor's dirs, the runner's scrub switch, and interpreter guards for
    third-party verifiers: the guard first on PYTHONPATH (the workspace cannot shadow the standard library or a test
    runner), no user site, no bytecode written into the workspace."""
    return (f"TESTS_DIR={tests_dir} LOGS_DIR={logs_dir} VERDICT_SCRUB=1 PYTHONPATH={guard_dir(tests_dir)} "
            "PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1")
