"""Generate feature-deletion tasks from pure-Python standard-library modules and their own Lib/test tests.

For a module M with a test file Lib/test/test_M.py on this machine, each candidate is a public top-level function
F of M that test_M.py mentions. The task repository holds `vendored/M.py` with F deleted; the instruction gives
F's signature and docstring; the hidden check runs the TestCase classes of test_M.py that mention F (with
`import M` rewritten to `from vendored import M`) in the verdict runner's isolated child with F traced, and
compares each test's trace of F's calls with the original module's (verify/verdict_runner.py); the oracle puts the
original module back. A candidate is kept only if, under the sandbox's interpreter, the kept classes pass on the
original module and fail without F, and the recorded check fails without F.

    python -m composer2_jax.bench.authoring.generate_stdlib --out benchmarks/tasks/v0 --count 10 --seed 0

Task names carry the generator version (`gen1-M-F`), so a changed generator never silently replaces old tasks.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import random
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from pathlib import Path

from composer2_jax.bench.authoring import record as verdict_record
from composer2_jax.env.sandbox_config import SandboxConfig
from composer2_jax.verify import verdict

GENERATOR_VERSION = 1
MODULES = ("textwrap", "shlex", "colorsys", "fnmatch", "graphlib", "difflib", "calendar", "fractions", "statistics",
           "string", "base64", "quopri", "glob", "ntpath", "posixpath", "gettext", "ipaddress", "reprlib", "pprint")
PACKAGE = "vendored"
_FAILED = re.compile(r"^(?:FAIL|ERROR): \S+ \((?:[\w.]*\.)?(\w+)\.\w+\)", re.MULTILINE)


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A function that could be deleted from a module, and the test classes that exercise it."""

    module: str
    function: str
    source: Path  # the module file
    test_file: Path
    start: int  # first line of the def (decorators included), 1-based
    end: int  # last line, inclusive
    signature: str
    docstring: str
    classes: tuple[str, ...]

    @property
    def name(self) -> str:
        """The task folder name: gen<version>-<module>-<function>."""
        return f"gen{GENERATOR_VERSION}-{self.module}-{self.function.lower().replace('_', '-')}"

    @property
    def lines(self) -> int:
        return self.end - self.start + 1


def stdlib_dirs(extra: list[str] | None = None) -> list[Path]:
    """Standard-library folders that may hold Lib/test, most specific first."""
    dirs = [Path(d) for d in (extra or [])] + [Path(sysconfig.get_paths()["stdlib"])]
    dirs += [Path(f"/usr/lib/python{sys.version_info.major}.{sys.version_info.minor}")]
    return [d for d in dict.fromkeys(dirs) if d.is_dir()]


def find_sources(module: str, dirs: list[Path]) -> tuple[Path, Path] | None:
    """(module file, its Lib/test file) from the first folder that has both."""
    for d in dirs:
        src, test = d / f"{module}.py", d / "test" / f"test_{module}.py"
        if src.is_file() and test.is_file():
            return src, test
    return None


def rewrite_imports(test_source: str, module: str) -> str | None:
    """The test file importing `vendored.<module>` instead of the stdlib one; None if it loads M another way."""
    if re.search(rf"""import_(?:fresh_)?module\(\s*['"]{module}['"]""", test_source):
        return None  # tests that re-import M by name (C accelerators) would bypass the copy
    out = re.sub(rf"^(\s*)import {module}(\s+as\s+\w+)?\s*$", rf"\1from {PACKAGE} import {module}\2", test_source,
                 flags=re.MULTILINE)
    out = re.sub(rf"^(\s*)from {module} import ", rf"\1from {PACKAGE}.{module} import ", out, flags=re.MULTILINE)
    if re.search(rf"^\s*import .*\b{module}\b", out, re.MULTILINE) and not re.search(rf"from {PACKAGE}", out):
        return None
    return out


def test_classes(test_source: str, function: str) -> tuple[str, ...]:
    """Names of the top-level TestCase-like classes whose body mentions the function."""
    tree, word = ast.parse(test_source), re.compile(rf"\b{re.escape(function)}\b")
    out = []
    for node in tree.body:
        is_case = isinstance(node, ast.ClassDef) and (
            "Test" in node.name or any("TestCase" in ast.unparse(b) for b in node.bases))
        if is_case and word.search(ast.get_source_segment(test_source, node) or ""):
            out.append(node.name)
    return tuple(out)


def candidates(module: str, src: Path, test: Path, min_lines: int = 4, max_lines: int = 60) -> list[Candidate]:
    """Public documented top-level functions of the module that its tests mention."""
    source, test_source = src.read_text(), test.read_text()
    tree = ast.parse(source)
    out = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
            continue
        doc = ast.get_docstring(node)
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        if not doc or not min_lines <= node.end_lineno - start + 1 <= max_lines:
            continue
        classes = test_classes(test_source, node.name)
        if classes:
            out.append(Candidate(module, node.name, src, test, start, node.end_lineno,
                                 f"{node.name}({ast.unparse(node.args)})", doc, classes))
    return out


def delete_function(source: str, cand: Candidate) -> str:
    """The module source without the function's lines."""
    lines = source.splitlines(keepends=True)
    return "".join(lines[:cand.start - 1] + lines[cand.end:])


def run_test_classes(python: str, repo: Path, tests_dir: Path, test_module: str, classes: tuple[str, ...],
                     timeout: float) -> tuple[int, str]:
    """(exit code, output) of the named unittest classes of `test_module` (on PYTHONPATH `tests_dir`), run from
    `repo` like the hidden verifier runs them; (-1, "timed out") past `timeout` seconds."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tests_dir), "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/tmp",
           "LANG": "C.UTF-8"}
    ids = [f"{test_module}.{c}" for c in classes]
    try:
        r = subprocess.run([python, "-m", "unittest", *ids], cwd=repo, capture_output=True, text=True, env=env,
                           timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return -1, "timed out"
    return r.returncode, r.stdout + r.stderr


def _run_tests(python: str, repo: Path, tests_dir: Path, module: str, classes: tuple[str, ...],
               timeout: float) -> tuple[int, str]:
    """The stdlib layout's test classes: tests/test_M.py."""
    return run_test_classes(python, repo, tests_dir, f"test_{module}", classes, timeout)


def _layout(work: Path, cand: Candidate, module_source: str, test_source: str) -> tuple[Path, Path]:
    """Write repo/vendored/M.py and tests/test_M.py under work; (repo, tests)."""
    repo, tests = work / "repo", work / "tests"
    (repo / PACKAGE).mkdir(parents=True, exist_ok=True)
    tests.mkdir(exist_ok=True)
    (repo / PACKAGE / "__init__.py").write_text("")
    (repo / PACKAGE / f"{cand.module}.py").write_text(module_source)
    (tests / f"test_{cand.module}.py").write_text(test_source)
    return repo, tests


def verify(cand: Candidate, python: str, timeout: float = 60.0) -> tuple[str, ...] | None:
    """The test classes that pass on the original and, together, fail without the function; None if unusable."""
    test_source = rewrite_imports(cand.test_file.read_text(), cand.module)
    if test_source is None:
        return None
    original = cand.source.read_text()
    with tempfile.TemporaryDirectory() as tmp:
        repo, tests = _layout(Path(tmp), cand, original, test_source)
        code, out = _run_tests(python, repo, tests, cand.module, cand.classes, timeout)
        failing = set(_FAILED.findall(out)) if code else set()
        if code < 0 or (code and not failing):
            return None  # timed out, or broke in a way that names no class (import error)
        kept = tuple(c for c in cand.classes if c not in failing)
        if not kept or _run_tests(python, repo, tests, cand.module, kept, timeout)[0] != 0:
            return None
        (repo / PACKAGE / f"{cand.module}.py").write_text(delete_function(original, cand))
        if _run_tests(python, repo, tests, cand.module, kept, timeout)[0] == 0:
            return None
    return kept


# ---------------------------------------------------------------------------------------------------- writing

_SOLVE_SH = """#!/usr/bin/env bash
# Put the original definition of {function} back where it was deleted (after line {line}).
set -euo pipefail
python3 - "$(dirname "$0")/{function}.py.txt" <<'PY'
import sys
path = "{package}/{module}.py"
lines = open(path).read().splitlines(keepends=True)
lines[{line}:{line}] = open(sys.argv[1]).read().splitlines(keepends=True)
open(path, "w").write("".join(lines))
PY
"""

UNORDERED = ("glob",)  # modules whose iterators list directories: their order is the filesystem's, not the function's


def check_spec(cand: Candidate, classes: tuple[str, ...]) -> dict:
    """check.json of a generated task: trace the function through the kept test classes, and where it is defined.

    The child runs the module's own tests with the function wrapped and answers, per test, the calls it saw (the
    arguments, the results, the exceptions); the hidden values are the traces of the original module, as sha256.
    The tests' own pass/fail is not part of the verdict: their expected literals run inside the child.
    """
    module = f"{PACKAGE}.{cand.module}"
    trace = {"kind": "trace", "module": module, "function": cand.function, "tests": f"test_{cand.module}",
             "classes": list(classes)}
    if cand.module in UNORDERED:
        trace["unordered_iterators"] = True
    return {"version": 1, "timeout_s": 100.0, "support": [f"test_{cand.module}.py"],
            "items": [trace, {"kind": "defined_in", "name": "defined_in_the_vendored_module", "module": module,
                              "function": cand.function}],
            "match": {f"test_{cand.module}.*": {"sha256": True}}}


def write_verifier(tests: Path, cand: Candidate, classes: tuple[str, ...], test_source: str, original: str,
                   python: str) -> None:
    """tests/ of a generated task: the module's test file, the check, the runner, test.sh, and the hidden values
    recorded with the runner on the original module (the starting module must fail them)."""
    tests.mkdir(parents=True, exist_ok=True)
    (tests / f"test_{cand.module}.py").write_text(test_source)
    check = check_spec(cand, classes)
    (tests / verdict.vr.CHECK).write_text(json.dumps(check, indent=1) + "\n")
    shutil.copyfile(verdict.RUNNER, tests / verdict.RUNNER_NAME)
    (tests / "test.sh").write_text(verdict.TEST_SH)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        (repo / PACKAGE).mkdir(parents=True)
        (repo / PACKAGE / "__init__.py").write_text("")
        (repo / PACKAGE / f"{cand.module}.py").write_text(original)
        expected = verdict_record.expected_from_answers(verdict_record.record_local(repo, tests, python)["answers"],
                                                      check)
        (repo / PACKAGE / f"{cand.module}.py").write_text(delete_function(original, cand))
        starting = verdict_record.record_local(repo, tests, python)["answers"]
    if verdict.vr.judge(starting, expected)["reward"] != 0.0:
        raise ValueError(f"{cand.name}: the starting module passes the recorded check; expected it to fail")
    (tests / verdict.vr.EXPECTED).write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")


def difficulty(cand: Candidate) -> str:
    """easy / medium / hard by the length of the deleted function."""
    return "easy" if cand.lines <= 12 else "medium" if cand.lines <= 30 else "hard"


def instruction(cand: Candidate) -> str:
    """instruction.md of a generated task."""
    doc = textwrap.indent(f'"""{cand.docstring}"""', "        ")
    return (f"`{PACKAGE}/{cand.module}.py` is our vendored copy of the Python standard library's `{cand.module}` "
            f"module, but the function `{cand.function}` was deleted from it by mistake, and everything that uses "
            f"it is broken. Restore it in `{PACKAGE}/{cand.module}.py`:\n\n    def {cand.signature}:\n{doc}\n\n"
            "It must behave exactly like the original standard-library function (the rest of the module is "
            f"unchanged and shows how it is used). Implement it in the vendored module itself: do not import or "
            f"delegate to the interpreter's own `{cand.module}`.\n")


def task_toml(cand: Candidate, classes: tuple[str, ...], python: str) -> str:
    """task.toml of a generated task (Harbor keys, generator provenance in [metadata])."""
    tags = ", ".join(f'"{t}"' for t in ("generated", "stdlib", "feature-deletion", cand.module))
    return (f'version = "1.0"\n\n[metadata]\nauthor_name = "composer2_jax.bench.authoring.generate_stdlib"\n'
            f'difficulty = "{difficulty(cand)}"\ncategory = "feature-deletion"\ntags = [{tags}]\n'
            f'generator = "stdlib-deletion"\ngenerator_version = {GENERATOR_VERSION}\n'
            f'source = "{cand.source}"\ntest_source = "{cand.test_file}"\nfunction = "{cand.function}"\n'
            f'deleted_lines = {cand.lines}\ntest_classes = [{", ".join(repr(c) for c in classes)}]\n'
            f'verified_with = "{python}"\n\n[verifier]\ntimeout_sec = 120.0\n\n[agent]\ntimeout_sec = 900.0\n\n'
            '[environment]\ncpus = 1\nmemory_mb = 1024\nstorage_mb = 256\nallow_internet = false\n')


def write_task(out_dir: Path, cand: Candidate, classes: tuple[str, ...], python: str) -> Path:
    """Write the task folder of a verified candidate; its path."""
    root = out_dir / cand.name
    original = cand.source.read_text()
    test_source = rewrite_imports(cand.test_file.read_text(), cand.module)
    repo = root / "environment" / "repo"
    (repo / PACKAGE).mkdir(parents=True)
    (repo / PACKAGE / "__init__.py").write_text('"""Vendored copies of standard-library modules."""\n')
    (repo / PACKAGE / f"{cand.module}.py").write_text(delete_function(original, cand))
    (repo / "README.md").write_text(f"# {PACKAGE}\n\nA vendored copy of the standard library's `{cand.module}` "
                                    f"module: `from {PACKAGE} import {cand.module}`.\n")
    (root / "instruction.md").write_text(instruction(cand))
    (root / "task.toml").write_text(task_toml(cand, classes, python))
    (root / "solution").mkdir()
    (root / "solution" / f"{cand.function}.py.txt").write_text(
        "".join(original.splitlines(keepends=True)[cand.start - 1:cand.end]))
    (root / "solution" / "solve.sh").write_text(_SOLVE_SH.format(package=PACKAGE, module=cand.module,
                                                                 function=cand.function, line=cand.start - 1))
    write_verifier(root / "tests", cand, classes, test_source, original, python)
    return root


def generate(out_dir: str | os.PathLike, count: int, seed: int = 0, modules: tuple[str, ...] = MODULES,
             stdlib: list[str] | None = None, python: str | None = None, per_module: int = 2) -> list[Path]:
    """Write up to `count` verified tasks (at most per_module per module) into out_dir; their paths."""
    python = python or SandboxConfig().python
    out, dirs = Path(out_dir), stdlib_dirs(stdlib)
    pool = []
    for module in modules:
        found = find_sources(module, dirs)
        if found is not None:
            pool += candidates(module, *found)
    return write_verified(pool, out, count, seed, per_module, lambda c: verify(c, python),
                          lambda c, classes: write_task(out, c, classes, python))


def write_verified(pool: list, out: Path, count: int, seed: int, per_module: int, verify_fn, write_fn,
                   rejected: tuple[type[BaseException], ...] = (ValueError,)) -> list[Path]:
    """The generators' selection (this module's and generate_package's): candidates (with `.module` and `.name`)
    in a seeded random order; each one whose folder is not in `out` yet and whose module has fewer than per_module
    tasks is verified (`verify_fn(cand)` → the test classes that tell the deletion apart, or none) and written
    (`write_fn(cand, classes)` → its folder); a write raising one of `rejected` (the traced check cannot tell the
    starting code from the original) is removed again. Stops at `count` tasks; their paths."""
    pool = list(pool)
    random.Random(seed).shuffle(pool)
    written, per = [], {}
    for cand in pool:
        if len(written) >= count:
            break
        if per.get(cand.module, 0) >= per_module or (out / cand.name).exists():
            continue
        classes = verify_fn(cand)
        if not classes:
            continue
        try:
            written.append(write_fn(cand, classes))
        except rejected:
            shutil.rmtree(out / cand.name, ignore_errors=True)
            continue
        per[cand.module] = per.get(cand.module, 0) + 1
    return written


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    p = argparse.ArgumentParser(prog="python -m composer2_jax.bench.authoring.generate_stdlib",
                                description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="suite folder to write task folders into")
    p.add_argument("--count", type=int, default=10, help="tasks to write")
    p.add_argument("--seed", type=int, default=0, help="order in which candidates are tried")
    p.add_argument("--modules", default=",".join(MODULES), help="comma-separated standard-library modules")
    p.add_argument("--stdlib", action="append", help="a standard-library folder holding test/ (repeatable)")
    p.add_argument("--per-module", type=int, default=2, help="most tasks per module")
    args = p.parse_args(argv)
    dirs = stdlib_dirs(args.stdlib)
    if not any((d / "test" / "support").is_dir() and any((d / "test").glob("test_*.py")) for d in dirs):
        print(f"no standard-library test suite (Lib/test) found in {[str(d) for d in dirs]}; pass --stdlib",
              file=sys.stderr)
        return 1
    paths = generate(args.out, args.count, args.seed, tuple(m for m in args.modules.split(",") if m), args.stdlib,
                     per_module=args.per_module)
    for path in paths:
        print(path)
    print(f"wrote {len(paths)} tasks to {args.out}", file=sys.stderr)
    return 0 if paths else 1


if __name__ == "__main__":
    sys.exit(main())
