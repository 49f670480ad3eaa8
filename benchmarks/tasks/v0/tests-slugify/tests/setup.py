"""Parent-side setup of a mutation-graded task (run by the verdict runner before any task code, and by the authoring
tool for the hidden values). The agent's tests run once per variant of the code under test -- the code as shipped
(original/), each behaviour-preserving rewrite (equivalents/<name>/) and each planted bug (mutants/<name>/) -- in a
copy of the workspace with that variant laid over it, one fresh child per variant, in random order (check.json
`shuffle_runs`). A child sees only its own copy, answers under the neutral name `suite`, and never learns which
variant it ran: the parent renames the answer. Only one copy exists at a time.
"""

import json
import os
import shutil


def _variants(tests):
    """{answer name: {relative path: bytes}} for original, equivalents/* and mutants/* (each over original)."""
    out = {}
    for kind in ("original", "equivalents", "mutants"):
        base = os.path.join(tests, kind)
        names = [""] if kind == "original" else sorted(os.listdir(base)) if os.path.isdir(base) else []
        for name in names:
            folder = os.path.join(base, name)
            files = {}
            for root, _, filenames in os.walk(folder):
                for n in filenames:
                    path = os.path.join(root, n)
                    with open(path, "rb") as f:
                        files[os.path.relpath(path, folder)] = f.read()
            out[f"{kind}/{name}" if name else kind] = files
    original = out.get("original", {})
    return {name: files if name == "original" else {**original, **files} for name, files in out.items()}


def _prepare(workspace, files):
    """A function making a fresh copy of the workspace with `files` laid over it."""
    def prepare(dest):
        shutil.rmtree(dest)
        shutil.copytree(workspace, dest, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", ".git"))
        for rel, data in files.items():
            target = os.path.join(dest, rel)
            if os.path.islink(target):
                os.unlink(target)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(data)
        return dest
    return prepare


def fixture(ctx):
    """The agent's test command and its timeout (from mutation.json)."""
    with open(os.path.join(ctx["tests"], "mutation.json")) as f:
        spec = json.load(f)
    return {"command": spec["command"], "timeout_s": spec["timeout_s"]}


def runs(ctx):
    """One run per variant; the child answers `suite`, the parent files it under the variant's name."""
    return [{"name": name, "items": [{"kind": "probe", "name": "suite"}], "rename": {"suite": name},
             "prepare": _prepare(ctx["workspace"], files)} for name, files in _variants(ctx["tests"]).items()]


def expected(ctx):
    """The hidden values: pass with at least min_tests tests on the original, pass on every rewrite, fail on every
    mutant."""
    with open(os.path.join(ctx["tests"], "mutation.json")) as f:
        min_tests = json.load(f)["min_tests"]
    out = {}
    for name in _variants(ctx["tests"]):
        if name == "original":
            out[name] = {"fields": {"ok": {"value": True}, "ran": {"at_least": min_tests}}}
        else:
            out[name] = {"fields": {"ok": {"value": name.startswith("equivalents/")}}}
    return out
