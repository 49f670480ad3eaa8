"""Grading as Harbor does it: after the agent's turn, in the same sandbox state the agent left, rewards read from
outside.

1. The verifier runs in the agent's own sandbox (processes included: a service the agent started is still
   answering), after its turn ends: never in a state the agent cannot see. A snapshot id instead of a sandbox
   grades a fresh sandbox forked from it.
2. Install the hidden tests (the task's tests/, then a step's tests/ over them) as root: image tasks at Harbor's
   /tests, with /logs/verifier emptied; workspace tasks at $TESTS_DIR=/tmp/tests with $LOGS_DIR=/tmp/logs (their
   root is read-only). Whatever the agent wrote into its own tests/ or reward files plays no part.
3. Run the test script under the verifier timeout (not capped by the tool-call limit) through `Environment.exec`:
   image tasks `/tests/test.sh` (made executable, as Harbor does) in the working directory as [verifier] user, with
   [environment] env + [verifier] env; workspace tasks `bash $TESTS_DIR/test.sh` from /workspace.
4. Read reward.json (any numeric keys) or reward.txt (one number) from the host through /proc/<pid>/root, one path
   component at a time and never through a symlink. Harbor's precedence: reward.json first, then reward.txt.
   The scalar that decides pass/fail (`scalar_reward`): the "reward" key; else reward.txt's number when both exist
   (Harbor's fallback); else the only key; else the mean of the keys. Every key is kept.
5. A verifier that could not run is a grading error with the tail of its output, never a 0 that looks like a model
   failure: a timeout, no reward file, exit 126/127 without a reward, or a reward written after its test runner
   failed to start (`startup_failure`: a missing interpreter or runner, pytest not installable) with no sign that a
   single test ran.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shlex
import stat
import time
from typing import Any

from composer2_jax.bench.task import Step, Task, resolve_env
from composer2_jax.env.bwrap import IMAGE_ROOT
from composer2_jax.env.transfer import pack_dir  # noqa: F401  (agents import it from here)

TESTS_DIR = "/tmp/tests"  # workspace tasks: Harbor's /tests (their root is read-only; /tmp is the sandbox's own)
LOGS_DIR = "/tmp/logs"  # workspace tasks: Harbor's /logs; the verifier writes verifier/reward.txt under it
WORKSPACE = "/workspace"
HARBOR_TESTS, HARBOR_LOGS = "/tests", "/logs"  # image tasks: Harbor's paths
_CHUNK = 64 * 1024  # base64 characters per command (one argv string must stay under the kernel's 128 KiB)
_OUTPUT_TAIL = 16 * 1024
# a test runner that never started: interpreter or runner missing, a package that could not be installed
_STARTUP = re.compile(r"(?:^|\n)[^\n]*(?:(?:pytest|py\.test|uv|uvx|python3?|pip3?|node|npm|go|cargo|java|ruby|bash)"
                      r"(?:: command not found|: not found| not found)|No module named '?pytest|"
                      r"No matching distribution found for|Could not find a version that satisfies|"
                      r"(?:bad interpreter|cannot execute|Exec format error))", re.IGNORECASE)
# evidence that tests did run (pytest's summary, unittest's footer, a test count)
_RAN = re.compile(r"(?:\d+ (?:passed|failed|errors?|xfailed|skipped)\b|^Ran \d+ tests?|collected \d+ items?|"
                  r"^(?:OK|FAILED)\b|\bPASSED\b|\bFAILED\b)", re.MULTILINE)


@dataclasses.dataclass(frozen=True)
class Grade:
    """What the hidden tests said about a sandbox."""

    reward: float  # the scalar that decides pass/fail (scalar_reward); 0.0 when there is none
    passed: bool  # reward >= the pass threshold (1.0)
    exit_code: int | None  # of the test script
    timed_out: bool
    output: str  # tail of the test script's stdout + stderr
    wall_s: float
    error: str | None = None  # why there is no trustworthy reward (a grading error, not a model failure)
    reward_source: str = "host"  # "host": read through /proc from outside; "sandbox": via cat (remote envs)
    rewards: dict[str, float] = dataclasses.field(default_factory=dict)  # every numeric key the verifier wrote

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return dataclasses.asdict(self)


def upload_commands(payload: str, blob: str, size: int = _CHUNK) -> list[str]:
    """Shell commands appending a base64 payload to the file `blob`, each one small enough for one argv string."""
    return [f"cat >> {blob} <<'__CHUNK__'\n{payload[i:i + size]}\n__CHUNK__" for i in range(0, len(payload), size)]


def unpack_command(blob: str, dest: str, python: str = "python3 -I") -> str:
    """A shell command unpacking the base64 tarball file `blob` into dest (with python3's tarfile), then removing it."""
    code = ("import base64, io, tarfile; "
            f"data = base64.b64decode(open('{blob}', 'rb').read()); "
            f"tarfile.open(fileobj=io.BytesIO(data)).extractall('{dest}')")
    return f"mkdir -p {dest} && {python} -c \"{code}\" && rm -f {blob}"


def is_local(env, sid: str) -> bool:
    """True when the sandbox's pid 1 is a process of this host (its pid namespace matches)."""
    info = env.info(sid)
    pid, pidns = info.get("pid"), info.get("pidns")
    try:
        return bool(pid) and os.stat(f"/proc/{pid}/ns/pid").st_ino == pidns
    except OSError:
        return False


def read_outside(env, sid: str, path: str, limit: int = 1 << 16, tail: bool = False) -> bytes | None:
    """Bytes of an absolute path inside a live local sandbox, read by the host without following symlinks.

    None if the file does not exist; OSError if a component is a symlink or the file is not a regular file.
    """
    pid = env.info(sid)["pid"]
    parts = [p for p in path.split("/") if p]
    fd = os.open(f"/proc/{pid}/root", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
        nxt = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    except FileNotFoundError:
        return None
    finally:
        os.close(fd)
    with os.fdopen(nxt, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path} in sandbox {sid} is not a regular file")
        if tail and st.st_size > limit:
            f.seek(st.st_size - limit)
        return f.read(limit)


def parse_reward(txt: bytes | None, js: bytes | None) -> tuple[float | None, str | None]:
    """(reward, None) from reward.txt or reward.json {"reward": x} contents, else (None, why) (the RL grader's rule)."""
    try:
        if txt is not None:
            value = float(txt.decode().strip())
        elif js is not None:
            value = float(json.loads(js)["reward"])
        else:
            return None, "the verifier wrote no reward.txt or reward.json"
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        return None, f"unreadable reward ({type(e).__name__}: {e}); expected a number in reward.txt"
    if not math.isfinite(value):
        return None, f"reward {value!r} is not finite"
    return value, None


def scalar_reward(rewards: dict[str, float], txt_value: float | None = None) -> float:
    """The pass/fail scalar of a reward dict: "reward"; else reward.txt's number; else the only key; else the mean."""
    if "reward" in rewards:
        return rewards["reward"]
    if txt_value is not None:
        return txt_value
    return sum(rewards.values()) / len(rewards)


def parse_rewards(txt: bytes | None, js: bytes | None) -> tuple[dict[str, float] | None, float | None, str | None]:
    """(rewards, scalar, None) from reward.json (Harbor's precedence) or reward.txt, else (None, None, why)."""
    try:
        txt_value = float(txt.decode().strip()) if txt is not None and txt.strip() else None
        if js is not None:
            parsed = json.loads(js)
            if not isinstance(parsed, dict):
                return None, None, f"reward.json holds {type(parsed).__name__}; expected an object of numbers"
            rewards = {str(k): float(v) for k, v in parsed.items()
                       if isinstance(v, (int, float)) and not isinstance(v, bool)}
            if not rewards and txt_value is None:
                return None, None, f"reward.json has no numeric keys: {js[:200]!r}"
        elif txt is not None:
            if txt_value is None:
                return None, None, "reward.txt is empty; expected a number"
            rewards = {"reward": txt_value}
        else:
            return None, None, "the verifier wrote no reward.txt or reward.json"
    except (ValueError, TypeError, UnicodeDecodeError) as e:
        return None, None, f"unreadable reward ({type(e).__name__}: {e}); expected a number or a JSON object"
    bad = [k for k, v in rewards.items() if not math.isfinite(v)]
    if bad or (txt_value is not None and not math.isfinite(txt_value)):
        return None, None, f"rewards {bad or ['reward.txt']} are not finite"
    scalar = scalar_reward(rewards, txt_value)
    return rewards, scalar, None


def startup_failure(output: str) -> str | None:
    """The line showing the verifier's test runner never started, unless the output shows tests that ran."""
    if _RAN.search(output):
        return None
    m = _STARTUP.search(output)
    return m.group(0).strip() if m else None


# ------------------------------------------------------------------------------------------------------ install & run


def _layout(task: Task) -> tuple[str, str, str]:
    """(tests dir, logs dir, output file name) of a task's kind."""
    if task.is_image:
        return HARBOR_TESTS, HARBOR_LOGS, "test-stdout.txt"
    return TESTS_DIR, LOGS_DIR, "test-output.txt"


def _test_dirs(task: Task, step: Step | None) -> list:
    """The folders uploaded to the tests dir, in order (a step's tests override same-named files)."""
    return [d for d in (task.tests_dir, step.tests_dir if step is not None else None) if d is not None and d.is_dir()]


def install_tests(env, sid: str, task: Task, step: Step | None = None) -> str | None:
    """Empty the logs and tests dirs and install the hidden tests as root; an error message, or None."""
    tests, logs, _ = _layout(task)
    root = {"user": ""} if task.is_image else {}
    prep = (f"rm -rf {tests} {logs}/verifier && mkdir -p {tests} {logs}/verifier {logs}/agent {logs}/artifacts"
            + (f" && chmod 777 {logs}/verifier {logs}/agent {logs}/artifacts" if task.is_image else ""))
    try:
        r = env.exec(sid, prep, timeout_s=60, **root)
        if r["exit_code"] != 0:
            return f"could not prepare {tests} and {logs}: {(r['stdout'] + r['stderr'])[-500:]}"
        for folder in _test_dirs(task, step):
            env.put_dir(sid, folder, tests, **root)
        if task.is_image:
            env.exec(sid, f"chmod +x {tests}/test.sh", timeout_s=60, user="")
    except Exception as e:  # noqa: BLE001 - a failed install is a grading error, not a crash
        return f"could not copy the hidden tests into the sandbox: {type(e).__name__}: {e}"
    return None


def _run_tests(env, sid: str, task: Task, step: Step | None, timeout: float) -> dict:
    """Run the test script (output to the logs dir); the exec result."""
    tests, logs, out = _layout(task)
    if not task.is_image:
        return env.exec(sid, f"cd {WORKSPACE} && TESTS_DIR={TESTS_DIR} LOGS_DIR={LOGS_DIR} PYTHONDONTWRITEBYTECODE=1 "
                             f"bash {TESTS_DIR}/test.sh > {LOGS_DIR}/verifier/{out} 2>&1", timeout_s=timeout)
    cfg = task.config
    user = step.config.verifier_user if step is not None and step.config.verifier_user is not None else cfg.verifier_user
    pairs = cfg.env + cfg.verifier_env + (step.config.verifier_env if step is not None else ())
    extra = resolve_env(pairs, f"{task.path}: [environment]/[verifier] env")
    return env.exec(sid, f"{shlex.quote(tests + '/test.sh')} > {logs}/verifier/{out} 2>&1", timeout_s=timeout,
                    user=user, env=extra)


def _read_results(env, sid: str, task: Task) -> tuple[bytes | None, bytes | None, bytes | None, str, str | None]:
    """(reward.txt, reward.json, output tail, source, error): from outside when local, else through the sandbox."""
    _, logs, out = _layout(task)
    names = ("reward.txt", "reward.json", out)
    prefix = IMAGE_ROOT if task.is_image else ""
    if is_local(env, sid):
        try:
            got = [read_outside(env, sid, f"{prefix}{logs}/verifier/{n}", tail=n == out,
                                limit=_OUTPUT_TAIL if n == out else 1 << 16) for n in names]
        except OSError as e:
            return None, None, None, "host", f"refused to read the verifier's files: {e}"
        return got[0], got[1], got[2], "host", None
    got = []
    for n in names:
        r = env.exec(sid, f"cat {logs}/verifier/{n}", timeout_s=30, **({"user": ""} if task.is_image else {}))
        got.append(r["stdout"].encode("latin-1") if r["exit_code"] == 0 else None)
    return got[0], got[1], got[2], "sandbox", None


def verifier_timeout(task: Task, step: Step | None) -> float:
    """The verifier's wall-clock limit: the step's, else the task's [verifier] timeout_sec."""
    if step is not None and step.config.verifier_timeout_s is not None:
        return step.config.verifier_timeout_s
    return task.config.verifier_timeout_s


def grade(env, source: str, task: Task, step: Step | None = None, pass_threshold: float = 1.0) -> Grade:
    """Run the task's (or step's) hidden tests in sandbox `source` as it is, or in a fresh fork of a snapshot id."""
    start = time.monotonic()
    live = source in env.sandboxes()
    sid = source if live else env.fork(source)
    try:
        error = install_tests(env, sid, task, step)
        if error is not None:
            return Grade(0.0, False, None, False, "", time.monotonic() - start, error)
        timeout = verifier_timeout(task, step)
        r = _run_tests(env, sid, task, step, timeout)
        txt, js, out, source_kind, read_error = _read_results(env, sid, task)
        output = (out or b"").decode("utf-8", "replace")
        rewards, reward, why = parse_rewards(txt, js)
        code = r.get("exit_code")
        if read_error is not None:
            reward, why = None, read_error
        elif r.get("timed_out"):
            reward, why = None, f"the verifier ran past its {timeout:g} s timeout"
        elif reward is None and code in (126, 127):
            why = f"the verifier could not start (exit {code}): {output[-300:].strip() or r.get('stderr', '')[-300:]}"
        elif reward is not None and reward < pass_threshold and startup_failure(output):
            reward, why = None, f"the verifier's test runner did not start: {startup_failure(output)}"
        value = 0.0 if reward is None else reward
        return Grade(value, reward is not None and reward >= pass_threshold, code, bool(r.get("timed_out")), output,
                     time.monotonic() - start, why, source_kind, rewards if reward is not None else {})
    finally:
        if not live:
            env.close(sid)
