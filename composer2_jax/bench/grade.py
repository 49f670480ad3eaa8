"""Grading: the hidden tests run in a fresh fork of the final workspace, and the reward is read from outside.

1. Fork the agent's sandbox (or a snapshot): the fork sees the workspace as the agent left it, with a fresh /tmp
   and none of the agent's processes.
2. Install the task's tests/ folder at a fresh, random path under /tmp ($TESTS_DIR, Harbor's /tests) and make a
   fresh $LOGS_DIR (Harbor's /logs): the agent never saw either, and whatever it wrote into the workspace's own
   tests/ or into a reward file plays no part. A task judged by the verdict runner (bench/verdict.py) gets its
   tests/ without expected.json: the hidden values stay on the host.
3. Run `bash $TESTS_DIR/test.sh` from /workspace with LOGS_DIR set, the runner's scrub switch on and
   bench/verifier_guard.py first on PYTHONPATH (the workspace cannot shadow the standard library or a test
   runner; no user site), under the task's verifier timeout; its output goes to $LOGS_DIR/verifier/test-output.txt.
4. Read, from the host through /proc/<pid>/root, one path component at a time and never through a symlink:
   answers.json for a verdict-runner task, judged here against the host's expected.json; otherwise
   $LOGS_DIR/verifier/reward.txt (or reward.json {"reward": x}). Then close the fork.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import math
import os
import secrets
import stat
import tarfile
import time
from pathlib import Path
from typing import Any

from composer2_jax.bench import verdict
from composer2_jax.bench.task import Task

VERIFIER_ROOT = "/tmp"  # fresh verifier dirs go here (the sandbox root is read-only; /tmp is the fork's own tmpfs)
WORKSPACE = "/workspace"
_CHUNK = 64 * 1024  # base64 characters per command (one argv string must stay under the kernel's 128 KiB)
_OUTPUT_TAIL = 16 * 1024


@dataclasses.dataclass(frozen=True)
class Grade:
    """What the hidden tests said about a workspace."""

    reward: float  # from reward.txt / reward.json; 0.0 when there is none
    passed: bool  # reward >= the pass threshold (1.0)
    exit_code: int | None  # of test.sh
    timed_out: bool
    output: str  # tail of test.sh's stdout + stderr
    wall_s: float
    error: str | None = None  # why there is no reward, if there is none
    reward_source: str = "host"  # "host": read through /proc from outside; "sandbox": via cat (remote envs)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return dataclasses.asdict(self)


def fresh_dirs() -> tuple[str, str]:
    """(tests dir, logs dir) at a fresh random path: Harbor's /tests and /logs for one grading."""
    base = f"{VERIFIER_ROOT}/.verifier-{secrets.token_hex(8)}"
    return f"{base}/tests", f"{base}/logs"


def pack_dir(folder: Path, exclude: tuple[str, ...] = ()) -> str:
    """A folder as base64 of a gzipped tar (paths relative to the folder, deterministic order), less `exclude`
    (paths relative to the folder)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tf:
        for path in sorted(folder.rglob("*")):
            if "__pycache__" in path.parts or str(path.relative_to(folder)) in exclude:
                continue
            info = tf.gettarinfo(str(path), arcname=str(path.relative_to(folder)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            if path.is_file():
                with open(path, "rb") as f:
                    tf.addfile(info, f)
            elif path.is_dir() and not path.is_symlink():
                tf.addfile(info)
    return base64.b64encode(buf.getvalue()).decode()


def _sh(env, sid: str, command: str, timeout: float) -> Any:
    """run_terminal_cmd in a sandbox."""
    return env.call(sid, "run_terminal_cmd", {"command": command, "timeout": timeout})


def upload_commands(payload: str, blob: str, size: int = _CHUNK) -> list[str]:
    """Shell commands appending a base64 payload to the file `blob`, each one small enough for one argv string."""
    return [f"cat >> {blob} <<'__CHUNK__'\n{payload[i:i + size]}\n__CHUNK__" for i in range(0, len(payload), size)]


def unpack_command(blob: str, dest: str) -> str:
    """A shell command unpacking the base64 tarball file `blob` into dest (with python3's tarfile), then removing it."""
    code = ("import base64, io, tarfile; "
            f"data = base64.b64decode(open('{blob}', 'rb').read()); "
            f"tarfile.open(fileobj=io.BytesIO(data)).extractall('{dest}')")
    return f"mkdir -p {dest} && python3 -I -c \"{code}\" && rm -f {blob}"


def install_tests(env, sid: str, task: Task, tests_dir: str, logs_dir: str,
                  exclude: tuple[str, ...] = ()) -> str | None:
    """Unpack the task's hidden tests (less `exclude`) at tests_dir and make logs_dir; an error message, or None."""
    blob = f"/tmp/.tests-{secrets.token_hex(6)}.b64"
    for command in upload_commands(pack_dir(task.tests_dir, exclude), blob):
        obs = _sh(env, sid, command, 60)
        if not obs.ok or obs.fields.get("exit_code") != 0:
            return f"could not copy the hidden tests into the grading sandbox: {obs.content[:500]}"
    guard = verdict.guard_dir(tests_dir)
    obs = _sh(env, sid, f"rm -rf {tests_dir} {logs_dir} {guard} && "
                        f"mkdir -p {logs_dir}/verifier {logs_dir}/agent {guard}"
                        f" && cat > {guard}/sitecustomize.py <<'__GUARD__' && {unpack_command(blob, tests_dir)}\n"
                        f"{verdict.GUARD.read_text()}__GUARD__\n", 60)
    if not obs.ok or obs.fields.get("exit_code") != 0:
        return f"could not unpack the hidden tests in the grading sandbox: {obs.content[:500]}"
    return None


def run_verifier(env, sid: str, task: Task, exclude: tuple[str, ...] = ()) -> tuple[Any, str, str | None]:
    """Install tests/ at fresh dirs and run test.sh there; (observation or None, logs dir, install error)."""
    tests_dir, logs_dir = fresh_dirs()
    error = install_tests(env, sid, task, tests_dir, logs_dir, exclude)
    if error is not None:
        return None, logs_dir, error
    obs = _sh(env, sid, f"cd {WORKSPACE} && {verdict.verifier_env(tests_dir, logs_dir)} "
                        f"bash {tests_dir}/test.sh > {logs_dir}/verifier/test-output.txt 2>&1",
              task.config.verifier_timeout_s)
    return obs, logs_dir, None


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
    """(reward, None) from reward.txt or reward.json contents, else (None, why)."""
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


def read_file(env, sid: str, path: str, limit: int = 1 << 16, tail: bool = False) -> bytes | None:
    """A file of the sandbox (None if absent): read from outside without following symlinks when the sandbox is
    local (OSError if refused), else through `cat` inside it (remote environments)."""
    if is_local(env, sid):
        return read_outside(env, sid, path, limit=limit, tail=tail)
    obs = _sh(env, sid, f"cat {path}", 30)
    return obs.fields.get("stdout", "").encode("utf-8", "replace") if obs.ok and obs.fields.get("exit_code") == 0 \
        else None


def read_verifier_files(env, sid: str, logs_dir: str, names: tuple[str, ...]) -> tuple[dict, str, str | None]:
    """({name: bytes or None}, source, error) of files under logs_dir/verifier; output files are read from their
    tail."""
    limits = {"test-output.txt": _OUTPUT_TAIL, verdict.vr.ANSWERS: verdict.ANSWERS_LIMIT}
    source = "host" if is_local(env, sid) else "sandbox"
    try:
        got = {n: read_file(env, sid, f"{logs_dir}/verifier/{n}", limits.get(n, 1 << 16), n.endswith("output.txt"))
               for n in names}
    except OSError as e:
        return {n: None for n in names}, source, f"refused to read the verifier's files: {e}"
    return got, source, None


def grade(env, source: str, task: Task, pass_threshold: float = 1.0) -> Grade:
    """Run the task's hidden tests on a fresh fork of `source` (a sandbox id or a snapshot id); see the module doc."""
    start = time.monotonic()
    try:
        expected = verdict.load_expected(task.tests_dir)
    except verdict.VerdictError as e:
        return Grade(0.0, False, None, False, "", time.monotonic() - start, str(e))
    gid = env.fork(source)
    try:
        obs, logs_dir, error = run_verifier(env, gid, task, verdict.HOST_ONLY if expected is not None else ())
        if error is not None:
            return Grade(0.0, False, None, False, "", time.monotonic() - start, error)
        names = (verdict.vr.ANSWERS,) if expected is not None else ("reward.txt", "reward.json")
        got, source_kind, read_error = read_verifier_files(env, gid, logs_dir, names + ("test-output.txt",))
        output = (got["test-output.txt"] or b"").decode("utf-8", "replace")
        if expected is not None:
            judged, why = verdict.judge_answers(got[verdict.vr.ANSWERS], expected)
            reward = None if judged is None else judged.reward
            output = output + ("\n" + judged.summary() if judged is not None else "")
        else:
            reward, why = parse_reward(got["reward.txt"], got["reward.json"])
        timed_out = obs.error == "timeout"
        if read_error is not None:
            reward, why = None, read_error
        elif timed_out:
            reward, why = None, f"the verifier ran past its {task.config.verifier_timeout_s:g} s timeout"
        elif obs.error is not None:
            reward, why = None, f"the verifier could not run: {obs.content[:500]}"
        value = 0.0 if reward is None else reward
        return Grade(value, reward is not None and reward >= pass_threshold, obs.fields.get("exit_code"), timed_out,
                     output, time.monotonic() - start, why, source_kind)
    finally:
        env.close(gid)
