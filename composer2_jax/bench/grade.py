"""Grading as Harbor does it: after the agent's turn, on the files the agent left (none of its processes), rewards
read from outside.

1. The verifier runs with nothing of the agent alive, on exactly the files the agent left: a live sandbox is forked
   (`Environment.fork` sweeps it first: its pid 1 SIGKILLs every other process of its pid namespace; then its files
   are frozen) and the verifier runs in the fork, a new bwrap tree in fresh pid, mount and user namespaces with its
   own empty upper layer. No process of the agent phase can see the verifier's processes (environment, ptrace,
   signals) or write its files (tests/, reward files): they live in another mount namespace and another upper
   layer. A service the agent started is therefore not answering; an image's ENTRYPOINT is started afresh in the
   fork, as at every container start. A snapshot id grades a fresh fork of it the same way. What the verifier runs
   from the image itself (bash, python, curl, an ENTRYPOINT, /etc/ld.so.preload) the agent could have replaced:
   `Grade.agent_files` lists the agent-written paths under those system folders (image tasks), so a verdict that
   depends on them is marked.
2. Install the hidden tests (the task's tests/, then a step's tests/ over them) as root, only now: image tasks at
   Harbor's /tests, with /logs/verifier emptied; workspace tasks at a fresh random $TESTS_DIR and $LOGS_DIR under
   /tmp (their root is read-only). Whatever the agent wrote into its own tests/ or reward files plays no part. A
   task judged by the verdict runner (verify/verdict.py) gets its tests/ without expected.json: the hidden values
   stay on the host.
3. Image tasks: switch the sandbox to the verifier's network (verify/network.py: the package registries this host
   is configured for and the mirror map, whatever [environment] allow_internet gave the agent; the mirror CA and
   proxy settings inside) for the run of the test script only.
   Run the test script under the verifier timeout (not capped by the tool-call limit) through `Environment.exec`,
   with verify/guard.py first on PYTHONPATH (the workspace cannot shadow the standard library or a test
   runner; no user site): image tasks `/tests/test.sh` (made executable, as Harbor does) in the working directory as
   [verifier] user, with [environment] env + [verifier] env; workspace tasks `bash $TESTS_DIR/test.sh` from
   /workspace with the runner's scrub switch on.
4. Read from the host through /proc/<pid>/root, one path component at a time and never through a symlink:
   answers.json for a verdict-runner task, judged here against the host's expected.json; otherwise reward.json
   (any numeric keys) or reward.txt (one number), Harbor's precedence: reward.json first, then reward.txt. The
   scalar that decides pass/fail (`scalar_reward`): the "reward" key; else reward.txt's number when both exist
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
import secrets
import shlex
import stat
import time
from typing import Any, NamedTuple

from composer2_jax.bench.task import Step, Task, resolve_env
from composer2_jax.env.bwrap import IMAGE_ROOT
from composer2_jax.env.transfer import pack_dir  # noqa: F401  (agents and bench/authoring/record.py import it from here)
from composer2_jax.verify import network as verifier_net
from composer2_jax.verify import verdict

VERIFIER_ROOT = "/tmp"  # workspace tasks: fresh verifier dirs go here (their root is read-only; /tmp is their own)
WORKSPACE = "/workspace"
HARBOR_TESTS, HARBOR_LOGS = "/tests", "/logs"  # image tasks: Harbor's paths
_CHUNK = 64 * 1024  # base64 characters per command (one argv string must stay under the kernel's 128 KiB)
_OUTPUT_TAIL = 16 * 1024
# a test runner that never started: interpreter or runner missing, a package that could not be installed
_STARTUP = re.compile(r"(?:^|\n)[^\n]*(?:(?:pytest|py\.test|uv|uvx|python3?|pip3?|node|npm|go|cargo|java|ruby|bash)"
                      r"(?:: command not found|: not found| not found)|No module named '?pytest|"
                      r"No matching distribution found for|Could not find a version that satisfies|"
                      r"error: Failed to download|No interpreter found for Python|"
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
    # image tasks: paths the agent wrote (or deleted) under the image's system folders (TRUSTED_DIRS) or at its
    # ENTRYPOINT, at most AGENT_FILES_SHOWN of them: the verdict depends on agent-writable files when not empty
    agent_files: list[str] = dataclasses.field(default_factory=list)
    agent_files_total: int | None = 0  # how many such paths in all (None: unknown, a remote environment)
    egress: list[dict] = dataclasses.field(default_factory=list)  # the verifier fork's egress events

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return dataclasses.asdict(self)


TRUSTED_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")  # what a verifier runs and loads
AGENT_FILES_SHOWN = 20


def agent_files(env, sid: str) -> tuple[list[str], int | None]:
    """(first AGENT_FILES_SHOWN paths, total) the agent changed under TRUSTED_DIRS or at the ENTRYPOINT of an image
    sandbox: entries of its own snapshot layers (every layer of its chain that is not an image layer), whiteouts
    included. (None total) when the layers cannot be read from here (a remote environment)."""
    rt = getattr(env, "rt", None)
    if rt is None or not is_local(env, sid):
        return [], None
    profile = env.profile(sid)
    entry = profile.entrypoint[0].lstrip("/") if profile is not None and profile.entrypoint and \
        profile.entrypoint[0].startswith("/") else None
    found: set[str] = set()
    for layer in env.info(sid)["chain"]:
        if layer.startswith("I"):
            continue
        root = rt.layers.path(layer)
        for top in TRUSTED_DIRS:
            for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
                rel = os.path.relpath(dirpath, root)
                found.update("/" + os.path.join(rel, n) for n in filenames)
                found.update("/" + os.path.join(rel, n) for n in dirnames if os.path.islink(os.path.join(dirpath, n)))
        if entry is not None and os.path.lexists(os.path.join(root, entry)):
            found.add("/" + entry)
    ordered = sorted(found)
    return ordered[:AGENT_FILES_SHOWN], len(ordered)


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


class Layout(NamedTuple):
    """Where one grading's verifier lives in the sandbox."""

    tests: str  # Harbor's /tests
    logs: str  # Harbor's /logs; the verifier writes verifier/reward.txt (or answers.json) under it
    site: str  # verify/guard.py goes here as sitecustomize.py, first on the verifier's PYTHONPATH
    output: str  # the test script's stdout + stderr, under logs/verifier


def fresh_dirs() -> tuple[str, str]:
    """(tests dir, logs dir) at a fresh random path under /tmp: Harbor's /tests and /logs for one grading."""
    base = f"{VERIFIER_ROOT}/.verifier-{secrets.token_hex(8)}"
    return f"{base}/tests", f"{base}/logs"


def layout(task: Task) -> Layout:
    """A grading's verifier paths: image tasks at Harbor's fixed /tests and /logs (their test.sh names them), with the
    guard at a fresh path; workspace tasks at fresh random paths (a verifier the agent could not have anticipated)."""
    if task.is_image:
        return Layout(HARBOR_TESTS, HARBOR_LOGS, f"{VERIFIER_ROOT}/.verifier-site-{secrets.token_hex(8)}",
                      "test-stdout.txt")
    tests, logs = fresh_dirs()
    return Layout(tests, logs, verdict.guard_dir(tests), "test-output.txt")


def _test_dirs(task: Task, step: Step | None) -> list:
    """The folders uploaded to the tests dir, in order (a step's tests override same-named files)."""
    return [d for d in (task.tests_dir, step.tests_dir if step is not None else None) if d is not None and d.is_dir()]


def install_tests(env, sid: str, task: Task, where: Layout, step: Step | None = None,
                  exclude: tuple[str, ...] = ()) -> str | None:
    """Empty the logs and tests dirs and install the hidden tests (less `exclude`, paths relative to tests/) and the
    verifier guard as root; an error message, or None."""
    tests, logs = where.tests, where.logs
    root = {"user": ""} if task.is_image else {}
    prep = (f"rm -rf {tests} {logs}/verifier {where.site} && "
            f"mkdir -p {tests} {logs}/verifier {logs}/agent {logs}/artifacts {where.site}"
            + (f" && chmod 777 {logs}/verifier {logs}/agent {logs}/artifacts" if task.is_image else "")
            + f" && cat > {where.site}/sitecustomize.py <<'__GUARD__'\n{verdict.GUARD.read_text()}__GUARD__\n")
    try:
        r = env.exec(sid, prep, timeout_s=60, **root)
        if r["exit_code"] != 0:
            return f"could not prepare {tests} and {logs}: {(r['stdout'] + r['stderr'])[-500:]}"
        for folder in _test_dirs(task, step):
            env.put_dir(sid, folder, tests, exclude=exclude, **root)
        if task.is_image:
            env.exec(sid, f"chmod +x {tests}/test.sh", timeout_s=60, user="")
    except Exception as e:  # noqa: BLE001 - a failed install is a grading error, not a crash
        return f"could not copy the hidden tests into the sandbox: {type(e).__name__}: {e}"
    return None


def _run_tests(env, sid: str, task: Task, step: Step | None, timeout: float, where: Layout,
               net_env: dict[str, str] | None = None) -> dict:
    """Run the test script (output to the logs dir) with the guard first on PYTHONPATH (and, for image tasks, the
    verifier network's client settings under the task's env); the exec result."""
    out = f"{where.logs}/verifier/{where.output}"
    if not task.is_image:
        return env.exec(sid, f"cd {WORKSPACE} && {verdict.verifier_env(where.tests, where.logs)} "
                             f"bash {where.tests}/test.sh > {out} 2>&1", timeout_s=timeout)
    cfg = task.config
    user = (step.config.verifier_user if step is not None and step.config.verifier_user is not None
            else cfg.verifier_user)
    pairs = cfg.env + cfg.verifier_env + (step.config.verifier_env if step is not None else ())
    extra = resolve_env(pairs, f"{task.path}: [environment]/[verifier] env")
    guard = {"PYTHONPATH": ":".join(p for p in (where.site, extra.get("PYTHONPATH", "")) if p),
             "PYTHONNOUSERSITE": "1"}
    return env.exec(sid, f"{shlex.quote(where.tests + '/test.sh')} > {out} 2>&1", timeout_s=timeout, user=user,
                    env={**(net_env or {}), **extra, **guard})


def read_file(env, sid: str, path: str, limit: int = 1 << 16, tail: bool = False, image: bool = False) -> bytes | None:
    """A file of the sandbox (None if absent): read from outside without following symlinks when the sandbox is
    local (OSError if refused), else through `cat` inside it (remote environments)."""
    if is_local(env, sid):
        return read_outside(env, sid, (IMAGE_ROOT if image else "") + path, limit=limit, tail=tail)
    r = env.exec(sid, f"cat {shlex.quote(path)}", timeout_s=30, **({"user": ""} if image else {}))
    return r["stdout"].encode("latin-1") if r["exit_code"] == 0 else None


def read_verifier_files(env, sid: str, logs_dir: str, names: tuple[str, ...],
                        image: bool = False) -> tuple[dict, str, str | None]:
    """({name: bytes or None}, source, error) of files under logs_dir/verifier; output files are read from their
    tail."""
    def limit(name: str) -> int:
        return _OUTPUT_TAIL if name.startswith("test-") else verdict.ANSWERS_LIMIT if name == verdict.vr.ANSWERS \
            else 1 << 16

    source = "host" if is_local(env, sid) else "sandbox"
    try:
        got = {n: read_file(env, sid, f"{logs_dir}/verifier/{n}", limit(n), n.startswith("test-"), image)
               for n in names}
    except OSError as e:
        return {n: None for n in names}, source, f"refused to read the verifier's files: {e}"
    return got, source, None


def run_verifier(env, sid: str, task: Task, exclude: tuple[str, ...] = ()) -> tuple[dict | None, str, str | None]:
    """Install tests/ (less `exclude`) at a fresh layout and run test.sh; (exec result or None, logs dir, install
    error). The one-call form used to record expected values (bench/authoring/record.py)."""
    where = layout(task)
    error = install_tests(env, sid, task, where, exclude=exclude)
    if error is not None:
        return None, where.logs, error
    return _run_tests(env, sid, task, None, task.config.verifier_timeout_s, where), where.logs, None


def verifier_timeout(task: Task, step: Step | None) -> float:
    """The verifier's wall-clock limit: the step's, else the task's [verifier] timeout_sec."""
    if step is not None and step.config.verifier_timeout_s is not None:
        return step.config.verifier_timeout_s
    return task.config.verifier_timeout_s


def grade(env, source: str, task: Task, step: Step | None = None, pass_threshold: float = 1.0) -> Grade:
    """Run the task's (or step's) hidden tests in a fresh fork of `source` (a live sandbox, swept first, or a
    snapshot id); the fork is closed after, and its egress events (the verifier phase's) go into the grade."""
    start = time.monotonic()
    try:
        expected = verdict.load_expected(task.tests_dir) if task.tests_dir is not None and step is None else None
    except verdict.VerdictError as e:
        return Grade(0.0, False, None, False, "", time.monotonic() - start, str(e))
    sid = env.fork(source)  # a live source is swept first: nothing of the agent phase runs beside the verifier
    try:
        g = _grade_fork(env, sid, task, step, pass_threshold, expected, start)
    finally:
        env.close(sid)
    if hasattr(env, "egress_log"):
        try:
            g = dataclasses.replace(g, egress=env.egress_log(sid))
        except KeyError:
            pass
    return g


def _grade_fork(env, sid: str, task: Task, step: Step | None, pass_threshold: float, expected, start: float
                ) -> Grade:
    """grade()'s work in the verifier's fork `sid`."""
    shown, total = agent_files(env, sid) if task.is_image else ([], 0)
    where = layout(task)
    error = install_tests(env, sid, task, where, step, verdict.HOST_ONLY if expected is not None else ())
    if error is not None:
        return Grade(0.0, False, None, False, "", time.monotonic() - start, error)
    timeout = verifier_timeout(task, step)
    net = None
    if task.is_image and hasattr(env, "set_phase"):
        try:
            net = verifier_net.enter(env, sid, phase=verifier_net.VERIFIER + (
                f":{step.config.name}" if step is not None else ""))
        except Exception as e:  # noqa: BLE001 - a verifier without its network is a grading error
            return Grade(0.0, False, None, False, "", time.monotonic() - start,
                         f"could not set up the verifier's network: {type(e).__name__}: {e}")
    try:
        r = _run_tests(env, sid, task, step, timeout, where, net.env if net is not None else None)
    finally:
        if net is not None:
            try:
                verifier_net.leave(env, sid, net)
            except Exception:  # a sandbox that died under its verifier keeps its grade
                if env.info(sid).get("alive", True):
                    raise
    names = (verdict.vr.ANSWERS,) if expected is not None else ("reward.txt", "reward.json")
    got, source_kind, read_error = read_verifier_files(env, sid, where.logs, names + (where.output,),
                                                       task.is_image)
    output = (got[where.output] or b"").decode("utf-8", "replace")
    if expected is not None:  # the project's own tasks: the verdict is computed here, on the host
        judged, why = verdict.judge_answers(got[verdict.vr.ANSWERS], expected)
        reward = None if judged is None else judged.reward
        rewards = {} if judged is None else {"reward": judged.reward}
        output = output + ("\n" + judged.summary() if judged is not None else "")
    else:
        rewards, reward, why = parse_rewards(got["reward.txt"], got["reward.json"])
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
                 time.monotonic() - start, why, source_kind, rewards if reward is not None else {}, shown, total)
