"""The verdict runner: code under test answers with values in an isolated child; a trusted process judges them.

Stdlib only. A copy of this file sits in the tests/ folder of every task the project writes (suites v0 and v1, where
loading a task installs it: bench/shared_files.py; the RL toy family), and test.sh runs it, from the repository root, as

    python3 -I -S "$TESTS_DIR/verdict_runner.py"

Protocol (docs/benchmark.md, "Verdicts"):
1. The parent (this process, started isolated: no workspace, script folder or user site on sys.path, no site
   hooks) reads the task's check (tests/check.json: what to ask), its child-side probes (tests/probes.py), its
   parent-side setup (tests/setup.py, optional: fixtures such as freshly generated logs, or one workspace copy per
   run) and, when present, the expected values (tests/expected.json). It makes itself non-dumpable (so processes
   of the same user cannot read its memory, environment or file descriptors) and a child subreaper (so every
   process the code under test starts stays its descendant), then removes the hidden files it read when it may
   (VERDICT_SCRUB=1, set by the project's graders, or the tests folder is Harbor's /tests).
2. Each run starts a fresh child, `python3 -I -B -c <this file> --child FD`, in a fresh, empty working directory
   with a clean environment. The child reads the run's request (a nonce, the workspace, the probes) from its
   private home folder, imports the code under test through a finder appended after the standard ones (the
   workspace is never on sys.path, so it cannot shadow a standard module), computes each item and writes one
   line per answer, carrying the nonce, to the answer pipe FD. Answers are canonical JSON (`encode`): plain data.
   (A grader may be the parent itself: verify/verdict.py `direct_run`, used for the RL toy family.)
3. The parent reads answer lines until the child's "done" line, EOF or the run's timeout, then SIGKILLs the child
   and every descendant. Lines without the nonce, for items not asked, repeated, or beyond the size cap are
   dropped. A child that exits early, hangs, crashes, writes files or prints "OK" has simply not answered.
4. The parent writes $LOGS_DIR/verifier/answers.json (atomically, through a fresh file renamed into place). With
   expected values in hand it judges (`judge`) and writes reward.txt and verdict.json; the project's graders
   instead keep expected.json on the host, never copy it into the sandbox, and judge answers.json themselves.

Everything the code under test controls -- its exit status, its stdout, the files it writes, the modules it
shadows, what it patches in its own interpreter -- is outside the verdict; only the values it answers count, and
they must equal values the child was never shown.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

# The child runs this same file, so module-level imports are paid twice per grading (RL grades every episode): the
# parent's own modules (subprocess, select, shutil, signal, tempfile, ctypes) are imported where they are used.

VERSION = 1
CHECK, PROBES, SETUP, EXPECTED = "check.json", "probes.py", "setup.py", "expected.json"
ANSWERS, VERDICT, REWARD = "answers.json", "verdict.json", "reward.txt"
MAX_ANSWER_BYTES = 32 << 20  # most bytes the parent reads from one child
MAX_DEPTH = 64  # deepest nesting `encode` accepts
DEFAULT_TIMEOUT_S = 60.0
KINDS = ("probe", "call", "defined_in", "trace")


class Unencodable(TypeError):
    """A value that is not plain data (or nests too deep); its type name is the message."""


# ============================================================================================ canonical values


def encode(value, depth: int = 0):
    """Plain data as canonical JSON; exact types only, so a subclass cannot lie about equality or its repr.

    None, bool, int, str stay as they are; other types become one-key tagged objects: float {"float": repr},
    bytes {"bytes": hex}, tuple {"tuple": [...]}, dict {"dict": [[k, v], ...] sorted}, set {"set": [...] sorted},
    Decimal {"decimal": str}, date/datetime/time {"date"|"datetime"|"time": isoformat}. Lists stay lists.
    """
    if depth > MAX_DEPTH:
        raise Unencodable("nesting deeper than %d" % MAX_DEPTH)
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        return {"float": repr(value)}
    if t is bytes or t is bytearray:
        return {"bytes": bytes(value).hex()}
    if t is list:
        return [encode(v, depth + 1) for v in value]
    if t is tuple:
        return {"tuple": [encode(v, depth + 1) for v in value]}
    if t is dict:
        pairs = [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]
        return {"dict": sorted(pairs, key=lambda p: json.dumps(p[0], sort_keys=True))}
    if t is set or t is frozenset:
        return {"set": sorted((encode(v, depth + 1) for v in value), key=lambda v: json.dumps(v, sort_keys=True))}
    tagged = _tagged_types().get(t)
    if tagged is not None:
        return {tagged: value.isoformat() if tagged != "decimal" else str(value)}
    raise Unencodable(t.__name__)


def _tagged_types() -> dict:
    """Exact standard-library value types encoded by their text form (only when their module is loaded)."""
    out = {}
    if "decimal" in sys.modules:
        out[sys.modules["decimal"].Decimal] = "decimal"
    if "datetime" in sys.modules:
        dt = sys.modules["datetime"]
        out.update({dt.datetime: "datetime", dt.date: "date", dt.time: "time"})
    return out


def decode(value):
    """The Python value of an `encode`d one (for call arguments; the host never needs it)."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) != 1:
        raise ValueError("tagged value %r; expected one key" % (value,))
    (tag, inner), = value.items()
    if tag == "float":
        return float(inner)
    if tag == "bytes":
        return bytes.fromhex(inner)
    if tag == "tuple":
        return tuple(decode(v) for v in inner)
    if tag == "dict":
        return {_hashable(decode(k)): decode(v) for k, v in inner}
    if tag == "set":
        return {_hashable(decode(v)) for v in inner}
    if tag == "decimal":
        import decimal
        return decimal.Decimal(inner)
    if tag in ("date", "datetime", "time"):
        import datetime
        return getattr(datetime, tag).fromisoformat(inner)
    raise ValueError("unknown tag %r" % tag)


def _hashable(v):
    """Lists decoded as dict keys or set members become tuples."""
    return tuple(_hashable(x) for x in v) if isinstance(v, list) else v


def canonical(value) -> str:
    """The one text of an encoded value (what sha256 specs hash)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


# ============================================================================================ judging


def _floats(a, b, rel: float, abs_: float) -> bool:
    """Encoded values equal, floats (and ints against floats) within rel/abs."""
    if isinstance(a, dict) and isinstance(b, dict) and set(a) == set(b) == {"float"}:
        x, y = float(a["float"]), float(b["float"])
        return x == y or (math.isfinite(x) and math.isfinite(y) and abs(x - y) <= max(abs_, rel * max(abs(x), abs(y))))
    if isinstance(a, dict) and set(a) == {"float"} and type(b) is int:
        return _floats(a, {"float": repr(float(b))}, rel, abs_)
    if isinstance(b, dict) and set(b) == {"float"} and type(a) is int:
        return _floats({"float": repr(float(a))}, b, rel, abs_)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_floats(x, y, rel, abs_) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_floats(a[k], b[k], rel, abs_) for k in a)
    return type(a) is type(b) and a == b


def _fields(answer) -> dict | None:
    """An encoded dict with string keys as a plain mapping, else None."""
    if not (isinstance(answer, dict) and set(answer) == {"dict"} and isinstance(answer["dict"], list)):
        return None
    pairs = answer["dict"]
    if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in pairs):
        return None
    return {k: v for k, v in pairs}


def match(answer, spec: dict) -> bool:
    """Whether an encoded answer meets an expected spec (see docs/benchmark.md, "Verdicts", for the spec kinds)."""
    if "labels" in spec:  # a classifier's answers: a list of booleans scored against the true labels
        labels = spec["labels"]
        if not (isinstance(answer, list) and len(answer) == len(labels) and all(type(a) is bool for a in answer)):
            return False
        tp = sum(a and y for a, y in zip(answer, labels))
        positives, predicted = sum(labels), sum(answer)
        wrong = sum(a != y for a, y in zip(answer, labels))
        return (wrong <= spec.get("wrong_at_most", len(labels))
                and tp >= spec.get("recall", 0.0) * positives and tp >= spec.get("precision", 0.0) * max(1, predicted)
                and 2 * tp >= spec.get("f1", 0.0) * max(1, positives + predicted))
    if "value" in spec:  # exact, except that an int and a float are equal when their values are (as in Python)
        return _floats(answer, spec["value"], 0.0, 0.0)
    if "approx" in spec:
        return _floats(answer, spec["approx"], float(spec.get("rel", 1e-9)), float(spec.get("abs", 1e-12)))
    if "sha256" in spec:
        import hashlib
        return hashlib.sha256(canonical(answer).encode()).hexdigest() == spec["sha256"]
    if "at_least" in spec or "at_most" in spec:
        if type(answer) is not int and not (isinstance(answer, dict) and set(answer) == {"float"}):
            return False
        x = float(answer["float"]) if isinstance(answer, dict) else answer
        return spec.get("at_least", -math.inf) <= x <= spec.get("at_most", math.inf)
    if "fields" in spec:
        got = _fields(answer)
        return got is not None and all(k in got and match(got[k], s) for k, s in spec["fields"].items())
    raise ValueError("expected spec %r has no known kind (value, labels, approx, sha256, at_least/at_most, fields)"
                     % spec)


def judge(answers: dict, expected: dict) -> dict:
    """The verdict on answers {name: encoded value} against expected {"probes": {name: spec}}.

    Every expected name is one case: passed (answered and matching), failed (answered, not matching) or
    unanswered (counted in `errors`). reward = 1.0 iff there is at least one case and every case passed.
    """
    specs = expected.get("probes") if isinstance(expected, dict) else None
    if not isinstance(specs, dict) or not specs:
        raise ValueError("expected values must be {\"probes\": {name: spec, ...}} with at least one probe")
    cases, counts = [], {"passed": 0, "failed": 0, "errors": 0}
    for name in sorted(specs):
        if name not in answers:
            status = "unanswered"
        else:
            try:
                status = "passed" if match(answers[name], specs[name]) else "failed"
            except (TypeError, ValueError, KeyError, AttributeError):
                status = "failed"
        counts["errors" if status == "unanswered" else status] += 1
        cases.append({"name": name, "status": status})
    reward = 1.0 if counts["passed"] == len(specs) else 0.0
    return {"version": VERSION, "reward": reward, **counts, "cases": cases}


# ============================================================================================ the child


class _WorkspaceFinder:
    """A meta path finder for top-level modules of the workspace, consulted after the standard finders."""

    def __init__(self, root: str):
        self.root = root

    def find_spec(self, name, path=None, target=None):
        if path is not None:
            return None  # submodules resolve through their package's __path__
        from importlib.machinery import PathFinder
        return PathFinder.find_spec(name, [self.root])


class Context:
    """What a probe gets: the workspace, the parent's fixture, a scratch folder, and helpers."""

    def __init__(self, workspace: str, fixture: dict, tmp: str):
        self.workspace, self.fixture, self.tmp = workspace, fixture, tmp

    def path(self, *parts: str) -> str:
        """A path inside the workspace."""
        return os.path.join(self.workspace, *parts)

    def load(self, name: str):
        """Import a module of the code under test (or the standard library) by dotted name."""
        import importlib
        return importlib.import_module(name)

    def run(self, argv, cwd: str | None = None, env: dict | None = None, timeout: float = 60.0,
            input: str | None = None) -> dict:
        """Run a command (default cwd: the workspace); {"returncode" (None on timeout), "stdout", "stderr"}."""
        import subprocess
        base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        try:
            r = subprocess.run(argv, cwd=cwd or self.workspace, env=base if env is None else {**base, **env},
                               capture_output=True, text=True, timeout=timeout, input=input)
        except subprocess.TimeoutExpired:
            return {"returncode": None, "stdout": "", "stderr": "timed out"}
        return {"returncode": r.returncode, "stdout": r.stdout, "stderr": r.stderr}

    @staticmethod
    def raises(exc_type, fn, *args, **kwargs):
        """{"raised": name} if fn(*args) raises an exc_type, {"raised_other": name} for another exception,
        {"returned": type name} if it returns."""
        try:
            result = fn(*args, **kwargs)
        except exc_type:
            return {"raised": exc_type.__name__}
        except Exception as e:  # noqa: BLE001 - which exception is the answer
            return {"raised_other": type(e).__name__}
        return {"returned": type(result).__name__}

    @staticmethod
    def message(exc_type, fn, *args, **kwargs) -> str | None:
        """The message of the exc_type fn(*args) raises, or None if it raises none."""
        try:
            fn(*args, **kwargs)
        except exc_type as e:
            return str(e)
        except Exception:  # noqa: BLE001
            return None
        return None


def _answer_line(fd: int, nonce: str, name: str, value) -> None:
    """Write one answer line (value encoded; a value that is not plain data answers {"unencodable": type})."""
    try:
        encoded = encode(value)
    except Unencodable as e:
        encoded = {"unencodable": str(e)}
    except RecursionError:
        encoded = {"unencodable": "recursion"}
    data = (json.dumps({"nonce": nonce, "name": name, "value": encoded}) + "\n").encode()
    while data:
        data = data[os.write(fd, data):]


def _error(e: BaseException) -> dict:
    """The answer of an item that raised."""
    return {"error": type(e).__name__}


def _call_item(item: dict):
    """A declarative call: module.function(*args, **kwargs), the result (listed if an iterator) or raised type."""
    import importlib
    fn = importlib.import_module(item["module"])
    for part in item["function"].split("."):
        fn = getattr(fn, part)
    try:
        result = fn(*decode(item.get("args", [])), **decode(item.get("kwargs", {"dict": []})))
    except Exception as e:  # noqa: BLE001 - the raised type is the answer
        return {"raised": type(e).__name__}
    if item.get("post") == "list":
        result = list(result)
    return result


def _defined_in(item: dict, workspace: str):
    """[module name, file relative to the workspace] of the function, unwrapped."""
    import importlib
    import inspect
    fn = inspect.unwrap(getattr(importlib.import_module(item["module"]), item["function"]))
    return [fn.__module__, os.path.relpath(fn.__code__.co_filename, workspace)]


def _trace_value(v, pid: str):
    """A traced argument or result as plain data: buffers by content, other objects by address-free repr."""
    import io
    import re
    t = type(v)
    if t is memoryview:
        return {"buffer": v.tobytes().hex()}
    if t in (io.BytesIO, io.StringIO):
        return {t.__name__: _trace_value(v.getvalue(), pid)}
    if t is str:
        return v.replace("@test_%s_" % pid, "@test_PID_")
    if t in (bytes, bytearray):
        return {"bytes": bytes(v).replace(("@test_%s_" % pid).encode(), b"@test_PID_").hex()}
    if t in (list, tuple):
        return {t.__name__: [_trace_value(x, pid) for x in v]}
    if t is dict:
        return {"dict": sorted(([_trace_value(k, pid), _trace_value(x, pid)] for k, x in v.items()),
                               key=lambda p: json.dumps(p, sort_keys=True))}
    if t in (set, frozenset):
        return {"set": sorted((_trace_value(x, pid) for x in v), key=lambda x: json.dumps(x, sort_keys=True))}
    try:
        return encode(v)
    except Unencodable:
        text = re.sub(r" at 0x[0-9a-fA-F]+", "", repr(v)).replace("@test_%s_" % pid, "@test_PID_")
        return {"repr": text[:400], "type": t.__name__}


def _trace_items(item: dict, emit) -> None:
    """Run the named test classes of a support test module with the function wrapped; answer each test's trace.

    Only the outermost calls are traced (the function calling itself, directly or not, is not), so any correct
    implementation gives the same trace as the original; the trace is the answer, the tests' own verdict is not.
    """
    import importlib
    import inspect
    import unittest
    pid = str(os.getpid())
    module = importlib.import_module(item["module"])
    original = getattr(module, item["function"], None)
    state = {"test": None, "depth": 0, "trace": []}

    def wrapper(*args, **kwargs):
        if state["depth"]:
            return original(*args, **kwargs)
        state["depth"] += 1
        entry = {"args": _trace_value(list(args), pid), "kwargs": _trace_value(kwargs, pid)}
        try:
            result = original(*args, **kwargs)
            if inspect.isgenerator(result) or (hasattr(result, "__next__") and hasattr(result, "__iter__")):
                result = list(result)
                yielded = _trace_value(result, pid)
                if item.get("unordered_iterators"):  # e.g. directory listings: the order is the filesystem's
                    yielded = {"sorted": sorted(yielded["list"], key=lambda x: json.dumps(x, sort_keys=True))}
                entry["yielded"] = yielded
                result = iter(result)
            else:
                entry["result"] = _trace_value(result, pid)
            return result
        except BaseException as e:
            entry["raised"] = type(e).__name__
            raise
        finally:
            for v in list(args) + list(kwargs.values()):  # output buffers: their content after the call
                if type(v).__name__ in ("BytesIO", "StringIO"):
                    entry.setdefault("buffers", []).append(_trace_value(v, pid))
            state["depth"] -= 1
            state["trace"].append(entry)

    if original is not None:
        setattr(module, item["function"], wrapper)
    try:
        tests = importlib.import_module(item["tests"])
        for cls_name in item["classes"]:
            for test in unittest.defaultTestLoader.loadTestsFromTestCase(getattr(tests, cls_name)):
                state["trace"] = []
                test.run(unittest.TestResult())
                emit(test.id(), {"trace": state["trace"]})
    finally:
        if original is not None:
            setattr(module, item["function"], original)


def child_main(fd: int) -> None:
    """The child: read the request, answer every item on fd, say done, and leave without running exit hooks."""
    os.set_inheritable(fd, False)
    home = os.environ["HOME"]  # private to this child, beside the (empty) working directory, not inside it
    with open(os.path.join(home, "request.json"), "rb") as f:
        request = json.loads(f.read())
    nonce, workspace = request["nonce"], request["workspace"]
    support, scratch = os.path.join(home, "support"), os.path.join(home, "scratch")
    os.makedirs(support, exist_ok=True)
    os.makedirs(scratch, exist_ok=True)
    for name, text in request.get("support", {}).items():
        with open(os.path.join(support, os.path.basename(name)), "w") as f:
            f.write(text)
    sys.path.insert(0, support)
    sys.meta_path.append(_WorkspaceFinder(workspace))
    ctx = Context(workspace, request.get("fixture", {}), scratch)
    probes, broken = {}, None
    if request.get("probes_source"):
        try:
            exec(compile(request["probes_source"], "probes.py", "exec"), probes)  # noqa: S102 - the task's probes
        except BaseException as e:  # noqa: BLE001 - every probe then answers this error
            broken = _error(e)

    def emit(name, value):
        _answer_line(fd, nonce, name, value)

    for item in request["items"]:
        try:
            if item["kind"] == "trace":
                _trace_items(item, emit)
                continue
            if item["kind"] == "probe":
                value = broken or probes["probe_" + item.get("probe", item["name"])](ctx)
            elif item["kind"] == "call":
                value = _call_item(item)
            else:
                value = _defined_in(item, workspace)
        except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt from task code are answers too
            value = _error(e)
        emit(item["name"], value)
    os.write(fd, (json.dumps({"nonce": nonce, "done": True}) + "\n").encode())
    os._exit(0)


# ============================================================================================ the parent


def _prctl(option: int, arg: int) -> bool:
    """prctl(option, arg) through libc; False where unavailable."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def harden() -> dict:
    """Non-dumpable (PR_SET_DUMPABLE 0) and child subreaper (PR_SET_CHILD_SUBREAPER 1); what took effect."""
    return {"nondumpable": _prctl(4, 0), "subreaper": _prctl(36, 1)}


def _children(pid: int) -> list[int]:
    """Pids whose parent is pid (from /proc)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name, "rb") as f:
                    if int(f.read().rsplit(b")", 1)[1].split()[1]) == pid:
                        out.append(int(name))
            except (OSError, ValueError, IndexError):
                continue
    return out


def kill_descendants(deadline_s: float = 10.0) -> int:
    """SIGKILL every descendant (orphans come back to us as subreaper) and reap them; how many were killed."""
    import signal
    me, killed, end = os.getpid(), 0, time.monotonic() + deadline_s
    while time.monotonic() < end:
        kids = _children(me)
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid == 0:
                break
        if not kids and not _children(me):
            return killed
        time.sleep(0.005)
    return killed


def child_env(home: str) -> dict:
    """The child's whole environment: a clean PATH, locale and a private HOME/TMPDIR."""
    return {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "HOME": home, "TMPDIR": home,
            "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}


def accept_line(line: bytes, nonce: str, names: set, answers: dict) -> bool:
    """File one answer line into answers (first answer per asked name wins, other nonces are ignored); True on the
    child's done line."""
    try:
        msg = json.loads(line)
    except ValueError:
        return False
    if not isinstance(msg, dict) or msg.get("nonce") != nonce:
        return False
    if msg.get("done") is True:
        return True
    name = msg.get("name")
    if isinstance(name, str) and (name in names or names == {"*"}) and name not in answers:
        answers[name] = msg.get("value")
    return False


def parse_answers(data: bytes, nonce: str, names: set) -> tuple[dict, bool]:
    """(answers, done) from a child's whole answer stream (how a grader that is the parent itself reads it)."""
    answers = {}
    for line in data[:MAX_ANSWER_BYTES].split(b"\n"):
        if accept_line(line, nonce, names, answers):
            return answers, True
    return answers, False


def _read_answers(fd: int, nonce: str, names: set, deadline: float, answers: dict) -> str:
    """Collect answer lines from fd into answers until done / EOF / deadline; why reading stopped."""
    import select
    buf, total = b"", 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return "timeout"
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return "exited before done"
        total += len(chunk)
        if total > MAX_ANSWER_BYTES:
            return "answers over %d bytes" % MAX_ANSWER_BYTES
        buf += chunk
        *lines, buf = buf.split(b"\n")
        if any(accept_line(line, nonce, names, answers) for line in lines):
            return "done"


def names_of(items: list[dict]) -> set:
    """The answer names a run's items may produce ("*" when a trace names its own)."""
    if any(i["kind"] == "trace" for i in items):
        return {"*"}
    return {i["name"] for i in items}


def run_child(request: dict, source: str, timeout_s: float, names: set, log_path: str) -> tuple[dict, dict]:
    """Start one child for a request, collect its answers, kill it and its descendants; (answers, run record)."""
    import shutil
    import subprocess
    import tempfile
    nonce = os.urandom(16).hex()
    home = tempfile.mkdtemp(prefix="verdict-child-")
    os.chmod(home, 0o700)
    cwd = os.path.join(home, "work")  # a fresh, empty working directory
    os.mkdir(cwd)
    with open(os.path.join(home, "request.json"), "w") as f:
        json.dump(dict(request, nonce=nonce), f)
    r_fd, w_fd = os.pipe()
    start, answers = time.monotonic(), {}
    try:
        with open(log_path, "ab") as log:
            proc = subprocess.Popen([sys.executable, "-I", "-B", "-c", source, "--child", str(w_fd)],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=cwd,
                                    env=child_env(home), pass_fds=(w_fd,), start_new_session=True)
        os.close(w_fd)
        w_fd = -1
        status = _read_answers(r_fd, nonce, names, start + timeout_s, answers)
        proc.kill()
        proc.wait()
    finally:
        os.close(r_fd)
        if w_fd >= 0:
            os.close(w_fd)
        killed = kill_descendants()
        shutil.rmtree(home, ignore_errors=True)
    return answers, {"status": status, "answered": len(answers), "exit": proc.returncode,
                     "killed_descendants": killed, "wall_s": round(time.monotonic() - start, 3)}


def _read(path: str) -> str | None:
    """A file's text, or None if it does not exist."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return None


class Check:
    """A task's check as read by the parent before anything of the task runs."""

    def __init__(self, tests: str, workspace: str):
        self.tests, self.workspace = tests, workspace
        text = _read(os.path.join(tests, CHECK))
        if text is None:
            raise FileNotFoundError("%s: no %s; expected the task's check (what to ask the code under test)"
                                    % (tests, CHECK))
        self.spec = json.loads(text)
        if self.spec.get("version") != VERSION:
            raise ValueError("%s: version %r; expected %d" % (CHECK, self.spec.get("version"), VERSION))
        for item in self.spec.get("items", []):
            if item.get("kind") not in KINDS:
                raise ValueError("%s: item %r has kind %r; expected one of %s" % (CHECK, item, item.get("kind"),
                                                                                  KINDS))
        self.timeout_s = float(self.spec.get("timeout_s", DEFAULT_TIMEOUT_S))
        self.probes_source = _read(os.path.join(tests, self.spec.get("probes", PROBES))) or ""
        self.support = {n: _read(os.path.join(tests, n)) for n in self.spec.get("support", [])}
        missing = [n for n, t in self.support.items() if t is None]
        if missing:
            raise FileNotFoundError("%s: support files %s are missing" % (tests, missing))
        expected = _read(os.path.join(tests, EXPECTED))
        self.expected = json.loads(expected) if expected is not None else None
        self.setup = {}
        setup = _read(os.path.join(tests, self.spec.get("setup", SETUP)))
        if setup is not None:
            exec(compile(setup, SETUP, "exec"), self.setup)  # noqa: S102 - the task's trusted parent-side setup

    def runs(self, tmp: str) -> tuple[list[dict], dict]:
        """(runs, fixture): setup.runs/fixture if defined, else one run of every item on the real workspace."""
        ctx = {"tests": self.tests, "workspace": self.workspace, "tmp": tmp}
        fixture = self.setup["fixture"](ctx) if "fixture" in self.setup else {}
        if "runs" in self.setup:
            return list(self.setup["runs"](ctx)), fixture
        return [{"name": "main", "items": self.items()}], fixture

    def items(self) -> list[dict]:
        """check.json's items, or one probe item per top-level `def probe_NAME` of probes.py, in source order."""
        if "items" in self.spec:
            return self.spec["items"]
        import ast
        return [{"kind": "probe", "name": node.name[len("probe_"):]} for node in ast.parse(self.probes_source).body
                if isinstance(node, ast.FunctionDef) and node.name.startswith("probe_")]


def scrub(tests: str) -> bool:
    """Remove the tests folder's contents (best effort); True if nothing is left."""
    import shutil
    for entry in os.listdir(tests):
        path = os.path.join(tests, entry)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError:
            pass
    try:
        return not os.listdir(tests)
    except OSError:
        return False


def write_atomic(folder: str, name: str, text: str) -> None:
    """Write folder/name through a fresh file renamed into place (a planted symlink is replaced, not followed)."""
    import tempfile
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + name + ".", dir=folder)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(folder, name))


def _args(argv: list[str]) -> dict:
    """--tests DIR (default: this file's folder), --workspace DIR (default: the working directory), --out DIR
    (default: $LOGS_DIR/verifier, Harbor's /logs/verifier)."""
    out = {"tests": os.path.dirname(os.path.abspath(__file__)), "workspace": os.getcwd(),
           "out": os.path.join(os.environ.get("LOGS_DIR", "/logs"), "verifier")}
    it = iter(argv)
    for arg in it:
        key, _, value = arg.partition("=")
        if key[2:] not in out or not key.startswith("--"):
            raise SystemExit("verdict_runner.py: unknown argument %r; expected --tests, --workspace, --out" % arg)
        out[key[2:]] = os.path.abspath(value or next(it))
    return out


def parent_main(argv: list[str]) -> int:
    """The trusted side: see the module docstring. Exit status 0 when it wrote its files (never the verdict)."""
    import shutil
    import tempfile
    args = _args(argv)
    guards = harden()
    with open(os.path.abspath(__file__), encoding="utf-8") as f:
        source = f.read()
    tests, workspace, out = args["tests"], args["workspace"], args["out"]
    check = Check(tests, workspace)
    private = tempfile.mkdtemp(prefix="verdict-")
    os.chmod(private, 0o700)
    os.chdir(private)
    runs, fixture = check.runs(private)
    guards["scrubbed"] = scrub(tests) if os.environ.get("VERDICT_SCRUB") == "1" or tests == "/tests" else False
    order = list(runs)
    if check.spec.get("shuffle_runs"):
        import random
        random.SystemRandom().shuffle(order)
    answers, records = {}, {}
    log = os.path.join(private, "children.log")
    for run in order:
        workspace_r = run["prepare"](tempfile.mkdtemp(dir=private)) if run.get("prepare") else workspace
        request = {"workspace": workspace_r, "items": run["items"], "fixture": fixture,
                   "probes_source": check.probes_source, "support": check.support}
        got, records[run["name"]] = run_child(request, source, check.timeout_s, names_of(run["items"]), log)
        rename = run.get("rename", {})  # the child answers under neutral names; the parent knows which run it was
        answers.update({rename.get(k, k): v for k, v in got.items()})
        if run.get("prepare"):
            shutil.rmtree(workspace_r, ignore_errors=True)
    doc = {"version": VERSION, "answers": answers, "runs": records, "guards": guards}
    write_atomic(out, ANSWERS, json.dumps(doc, sort_keys=True))
    _report(records, _tail(log))
    if check.expected is not None:
        verdict = judge(answers, check.expected)
        write_atomic(out, VERDICT, json.dumps(verdict, sort_keys=True))
        write_atomic(out, REWARD, "%g\n" % verdict["reward"])
        print("verdict: reward %g, %d passed, %d failed, %d unanswered" % (
            verdict["reward"], verdict["passed"], verdict["failed"], verdict["errors"]))
        for case in verdict["cases"]:
            if case["status"] != "passed":
                print("  %s: %s" % (case["name"], case["status"]))
    shutil.rmtree(private, ignore_errors=True)
    return 0


def _tail(path: str, size: int = 4000) -> str:
    """The last bytes of the children's output (diagnostics only)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - size))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _report(records: dict, tail: str) -> None:
    """Human-readable run summary on stdout (test-output.txt); never read by any grader."""
    for name, r in sorted(records.items()):
        print("run %s: %s, %d answers, %.2f s" % (name, r["status"], r["answered"], r["wall_s"]))
    if tail.strip():
        print("--- output of the code under test (tail) ---\n" + tail)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child_main(int(sys.argv[2]))
    sys.exit(parent_main(sys.argv[1:]))
