"""Feature-deletion tasks from any pure-Python package on disk and its own unittest tests (issue 17).

    python -m composer2_jax.bench.authoring.generate_package --out runs/gen_pkg --package pasta --count 10
    python -m composer2_jax.bench.authoring.generate_package --out runs/gen_pkg \
        --package dist/more-itertools-10.5.0.tar.gz

A package is named by one of (`open_package`):
  NAME                an importable top-level package (site-packages or anywhere on this interpreter's path);
  DIR                 a package folder (it holds __init__.py), or a folder holding one (an unpacked sdist,
                      `src/` layouts included; DIR::NAME picks one of several);
  FILE.whl / .zip     a wheel, unpacked into the cache first;
  FILE.tar.gz / .tgz  an sdist, unpacked into the cache first (its top-level tests/ folder is searched too).
It must be pure Python (no extension modules: a clear error names them).

For a package P, each candidate is a public, documented top-level function F of a module P.M that a test module of
the package mentions inside a unittest TestCase class (test modules: `test_*.py` / `*_test.py` defining a TestCase).
The task repository holds the whole package renamed `vendored_P` (absolute imports of P rewritten, so a copy of P
installed on the interpreter can never shadow it) with F deleted; the package's test modules that mention F are
removed from it. The instruction gives F's signature and docstring. The hidden check is the stdlib generator's
(bench/authoring/generate_stdlib.py): the verdict runner's isolated child runs the kept TestCase classes of the test
module with F traced and answers each test's trace; the trusted parent compares them with the traces of the original
package (sha256) — the tests' own pass/fail, exit statuses and files count for nothing (verify/verdict_runner.py). A
candidate is kept only if, under the sandbox's interpreter, its classes pass on the original package and fail
without F, and the recorded check fails without F. Task names: `pkg<version>-P-M-F`.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib.util
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import textwrap
import zipfile
from pathlib import Path

from composer2_jax.bench.authoring import generate_stdlib as generate
from composer2_jax.bench.authoring import record as verdict_record
from composer2_jax.env.sandbox_config import SandboxConfig
from composer2_jax.verify import verdict

GENERATOR_VERSION = 1
PREFIX = "vendored_"
_NATIVE = (".so", ".pyd", ".dylib", ".dll")
_TEST_FILE = re.compile(r"^(?:test_\w+|\w+_test)\.py$")
_FAILED = re.compile(r"^(?:FAIL|ERROR): \S+ \((?:[\w.]*\.)?(\w+)\.\w+\)", re.MULTILINE)


@dataclasses.dataclass(frozen=True)
class Package:
    """A pure-Python package on disk and the test modules found for it."""

    name: str  # the top-level import name
    root: Path  # the package folder (holds __init__.py)
    tests: tuple[Path, ...]  # test modules (inside the package or in an sdist's top-level tests/ folder)
    origin: str  # what it was opened from


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A function that could be deleted from a module of a package, and the test classes that exercise it."""

    package: Package
    module: str  # dotted, under the package's own name (e.g. "pasta.augment.rename")
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
        """The task folder name: pkg<version>-<module with dashes>-<function>."""
        slug = f"{self.module}-{self.function}".lower().replace(".", "-").replace("_", "-")
        return f"pkg{GENERATOR_VERSION}-{slug}"

    @property
    def lines(self) -> int:
        return self.end - self.start + 1

    @property
    def rel(self) -> Path:
        """The module file relative to the package folder."""
        return self.source.relative_to(self.package.root)

    @property
    def test_module(self) -> str:
        return self.test_file.stem


# ---------------------------------------------------------------------------------------------------- opening

def _unpack(path: Path, cache: Path) -> Path:
    """A wheel or sdist unpacked once into cache (keyed by file name and size); the folder."""
    dest = cache / f"{path.name}-{path.stat().st_size}"
    if dest.is_dir():
        return dest
    tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=cache))
    if path.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(path) as z:
            z.extractall(tmp)
    else:
        with tarfile.open(path) as t:
            t.extractall(tmp, filter="data")
    tmp.rename(dest)
    return dest


def _package_dirs(folder: Path) -> list[Path]:
    """Top-level packages of an unpacked distribution: folder/*, folder/src/*, and one level down (sdist roots)."""
    subdirs = [d for d in folder.iterdir() if d.is_dir() and not (d / "__init__.py").is_file()]  # sdist roots
    roots = [folder, folder / "src", *subdirs, *(d / "src" for d in subdirs)]
    found = []
    for r in roots:
        if r.is_dir():
            found += [d for d in sorted(r.iterdir()) if (d / "__init__.py").is_file() and d.name.isidentifier()
                      and d.name not in ("tests", "test", "docs")]
    return list(dict.fromkeys(found))


def open_package(spec: str, cache: str | os.PathLike | None = None) -> Package:
    """The package a spec names (see the module docstring); a clear error when it names none, several, or one that
    is not pure Python."""
    spec, _, pick = spec.partition("::")
    path = Path(spec)
    if path.is_file():
        if not spec.endswith((".whl", ".zip", ".tar.gz", ".tgz")):
            raise ValueError(f"package {spec!r}: a file, but not a wheel (.whl) or sdist (.tar.gz / .tgz)")
        cache_dir = Path(cache or Path(tempfile.gettempdir()) / "composer2-packages")
        cache_dir.mkdir(parents=True, exist_ok=True)
        folder = _unpack(path, cache_dir)
    elif path.is_dir():
        folder = path
    else:
        found = importlib.util.find_spec(spec) if spec.isidentifier() else None
        if found is None or not found.submodule_search_locations:
            raise ValueError(f"package {spec!r}: not a folder, wheel or sdist, nor an importable package on "
                             f"{sys.executable}")
        folder = Path(next(iter(found.submodule_search_locations)))
    if (folder / "__init__.py").is_file():
        root = folder
    else:
        dirs = [d for d in _package_dirs(folder) if not pick or d.name == pick]
        if len(dirs) != 1:
            raise ValueError(f"package {spec!r}: expected one top-level package in {folder}"
                             f"{f' named {pick!r}' if pick else ''}; found {[d.name for d in dirs]} (name one "
                             f"with {spec}::NAME)")
        root = dirs[0]
    native = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.suffix in _NATIVE)
    if native:
        raise ValueError(f"package {spec!r} ({root}) is not pure Python: extension modules {native[:5]}")
    extra = [d for d in (root.parent / "tests", root.parent / "test", root.parent.parent / "tests")
             if d.is_dir() and root.parent != Path(sys.prefix)]
    tests = [p for d in (root, *extra) for p in sorted(d.rglob("*.py")) if _is_test_module(p)]
    return Package(root.name, root, tuple(dict.fromkeys(tests)), spec)


def _is_test_module(path: Path) -> bool:
    """A test module: named test_*.py / *_test.py and defining a unittest TestCase class."""
    if not _TEST_FILE.match(path.name):
        return False
    try:
        return bool(re.search(r"^class \w+\([\w.]*TestCase\)", path.read_text(errors="replace"), re.MULTILINE))
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------------- renaming

def rename_imports(source: str, name: str) -> str | None:
    """The source with absolute imports of package `name` pointing at `vendored_<name>` (the names it binds are
    unchanged); None when it imports the package some other way (a dynamic import, `import a, name`)."""
    v = PREFIX + name
    out = re.sub(rf"^(\s*)from {name}((?:\.\w+)*) import ", rf"\1from {v}\2 import ", source, flags=re.MULTILINE)
    out = re.sub(rf"^(\s*)import {name}((?:\.\w+)*)\s+as\s+(\w+)[ \t]*$", rf"\1import {v}\2 as \3", out,
                 flags=re.MULTILINE)
    out = re.sub(rf"^(\s*)import {name}[ \t]*$", rf"\1import {v} as {name}", out, flags=re.MULTILINE)
    out = re.sub(rf"^(\s*)import {name}((?:\.\w+)+)[ \t]*$", rf"\1import {v}\2; import {v} as {name}", out,
                 flags=re.MULTILINE)
    if re.search(rf"^\s*from {name}\b", out, re.MULTILINE) or re.search(
            rf"""(?:import_module|__import__)\(\s*['"]{name}\b""", out):
        return None
    for line in re.findall(r"^\s*import ([^#\n;]*)", out, re.MULTILINE):  # e.g. `import os, name`
        if any(item.split()[0].split(".")[0] == name for item in line.split(",") if item.strip()):
            return None
    return out


def vendor(pkg: Package, dest: Path, skip: set[Path] = frozenset(), replace: dict[Path, str] | None = None) -> Path:
    """Copy the package to dest/vendored_<name> with its imports renamed, leaving out `skip` (relative paths) and
    writing `replace` ({relative path: text}) instead of the original text; the package folder."""
    out = dest / (PREFIX + pkg.name)
    for src in sorted(pkg.root.rglob("*")):
        rel = src.relative_to(pkg.root)
        if "__pycache__" in rel.parts or rel in skip or src.is_dir():
            continue
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.suffix == ".py":
            text = (replace or {}).get(rel, src.read_text(errors="replace"))
            target.write_text(rename_imports(text, pkg.name) or text)
        else:
            shutil.copyfile(src, target)
    return out


# ---------------------------------------------------------------------------------------------------- candidates

def _dotted(pkg: Package, path: Path) -> str:
    rel = path.relative_to(pkg.root).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join([pkg.name, *parts])


def candidates(pkg: Package, min_lines: int = 4, max_lines: int = 60) -> list[Candidate]:
    """Public documented top-level functions of the package's modules that a test module's TestCase classes
    mention, where the test module imports the function's module (by its last name)."""
    tests = {t: t.read_text(errors="replace") for t in pkg.tests}
    cases = {t: _test_cases(text) for t, text in tests.items()}
    out = []
    for src in sorted(pkg.root.rglob("*.py")):
        if src in tests or "__pycache__" in src.parts or _TEST_FILE.match(src.name):
            continue
        try:
            tree = ast.parse(src.read_text(errors="replace"))
        except SyntaxError:
            continue
        module = _dotted(pkg, src)
        last = module.rsplit(".", 1)[-1]
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                continue
            doc = ast.get_docstring(node)
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if not doc or not min_lines <= node.end_lineno - start + 1 <= max_lines:
                continue
            for test, text in tests.items():
                if not re.search(rf"\b{re.escape(last)}\b", text):
                    continue
                word = re.compile(rf"\b{re.escape(node.name)}\b")
                classes = tuple(name for name, body in cases[test] if word.search(body))
                if classes:
                    out.append(Candidate(pkg, module, node.name, src, test, start, node.end_lineno,
                                         f"{node.name}({ast.unparse(node.args)})", doc, classes))
    return out


def _test_cases(test_source: str) -> list[tuple[str, str]]:
    """(name, source) of the top-level TestCase-like classes of a test module (authoring/generate_stdlib.py
    `test_classes`)."""
    try:
        tree = ast.parse(test_source)
    except SyntaxError:
        return []
    lines = test_source.splitlines(keepends=True)
    return [(node.name, "".join(lines[node.lineno - 1:node.end_lineno])) for node in tree.body
            if isinstance(node, ast.ClassDef) and ("Test" in node.name or any("TestCase" in ast.unparse(b)
                                                                             for b in node.bases))]


def _deleted(cand: Candidate) -> str:
    return generate.delete_function(cand.source.read_text(errors="replace"), cand)


def _hidden_tests(cand: Candidate) -> set[Path]:
    """Test modules inside the package that mention the function (left out of the task repository)."""
    word = re.compile(rf"\b{re.escape(cand.function)}\b")
    return {t.relative_to(cand.package.root) for t in cand.package.tests
            if t.is_relative_to(cand.package.root) and word.search(t.read_text(errors="replace"))}


def _layout(work: Path, cand: Candidate, deleted: bool) -> tuple[Path, Path, str | None]:
    """work/repo (the vendored package, the function deleted if asked) and work/tests (the renamed test module);
    (repo, tests, the renamed test source or None when it cannot be renamed)."""
    repo, tests = work / "repo", work / "tests"
    repo.mkdir(parents=True, exist_ok=True)
    tests.mkdir(exist_ok=True)
    vendor(cand.package, repo, _hidden_tests(cand), {cand.rel: _deleted(cand)} if deleted else None)
    test_source = rename_imports(cand.test_file.read_text(errors="replace"), cand.package.name)
    if test_source is not None:
        (tests / cand.test_file.name).write_text(test_source)
    return repo, tests, test_source


def _run_tests(python: str, repo: Path, tests_dir: Path, cand: Candidate, classes: tuple[str, ...],
               timeout: float) -> tuple[int, str]:
    """(exit code, output) of the candidate's test classes, run from the repo like the hidden check runs them."""
    return generate.run_test_classes(python, repo, tests_dir, cand.test_module, classes, timeout)


def verify(cand: Candidate, python: str, timeout: float = 120.0) -> tuple[str, ...] | None:
    """The test classes that pass on the original package and, together, fail without the function; None if
    unusable."""
    with tempfile.TemporaryDirectory() as tmp:
        repo, tests, test_source = _layout(Path(tmp), cand, deleted=False)
        if test_source is None:
            return None
        code, out = _run_tests(python, repo, tests, cand, cand.classes, timeout)
        failing = set(_FAILED.findall(out)) if code else set()
        if code < 0 or (code and not failing):
            return None  # timed out, or broke in a way that names no class (an import error)
        kept = tuple(c for c in cand.classes if c not in failing)
        if not kept or _run_tests(python, repo, tests, cand, kept, timeout)[0] != 0:
            return None
        module = repo / (PREFIX + cand.package.name) / cand.rel
        module.write_text(rename_imports(_deleted(cand), cand.package.name) or _deleted(cand))
        if _run_tests(python, repo, tests, cand, kept, timeout)[0] == 0:
            return None
    return kept


# ---------------------------------------------------------------------------------------------------- writing

def check_spec(cand: Candidate, classes: tuple[str, ...]) -> dict:
    """check.json: trace the function through the kept classes (answers as sha256), and where it is defined."""
    module = PREFIX + cand.module
    return {"version": 1, "timeout_s": 100.0, "support": [cand.test_file.name],
            "items": [{"kind": "trace", "module": module, "function": cand.function, "tests": cand.test_module,
                       "classes": list(classes)},
                      {"kind": "defined_in", "name": "defined_in_the_vendored_module", "module": module,
                       "function": cand.function}],
            "match": {f"{cand.test_module}.*": {"sha256": True}}}


def write_verifier(root: Path, cand: Candidate, classes: tuple[str, ...], python: str) -> None:
    """tests/ of a task: the renamed test module, the check, the runner, test.sh, and the hidden values recorded on
    the original package (the starting repository must fail them)."""
    tests = root / "tests"
    tests.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        original, _, test_source = _layout(Path(tmp) / "original", cand, deleted=False)
        (tests / cand.test_file.name).write_text(test_source)
        check = check_spec(cand, classes)
        (tests / verdict.vr.CHECK).write_text(json.dumps(check, indent=1) + "\n")
        shutil.copyfile(verdict.RUNNER, tests / verdict.RUNNER_NAME)
        (tests / "test.sh").write_text(verdict.TEST_SH)
        expected = verdict_record.expected_from_answers(
            verdict_record.record_local(original, tests, python)["answers"], check)
        starting = verdict_record.record_local(root / "environment" / "repo", tests, python)["answers"]
    if verdict.vr.judge(starting, expected)["reward"] != 0.0:
        raise ValueError(f"{cand.name}: the starting repository passes the recorded check; expected it to fail")
    (tests / verdict.vr.EXPECTED).write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")


_SOLVE_SH = """#!/usr/bin/env bash
# Put the original definition of {function} back where it was deleted (after line {line}).
set -euo pipefail
python3 - "$(dirname "$0")/{function}.py.txt" <<'PY'
import sys
path = "{path}"
lines = open(path).read().splitlines(keepends=True)
lines[{line}:{line}] = open(sys.argv[1]).read().splitlines(keepends=True)
open(path, "w").write("".join(lines))
PY
"""


def instruction(cand: Candidate) -> str:
    """instruction.md of a task."""
    doc = textwrap.indent(f'"""{cand.docstring}"""', "        ")
    path = f"{PREFIX}{cand.package.name}/{cand.rel}"
    return (f"`{PREFIX}{cand.package.name}/` is our vendored copy of the `{cand.package.name}` package (imported as "
            f"`{PREFIX}{cand.package.name}`), but the function `{cand.function}` was deleted from `{path}` by "
            f"mistake, and everything that uses it is broken. Restore it there:\n\n    def {cand.signature}:\n"
            f"{doc}\n\nIt must behave exactly like the original function of `{cand.module}` (the rest of the "
            f"package is unchanged and shows how it is used). Implement it in the vendored module itself: do not "
            f"import or delegate to another copy of `{cand.package.name}`.\n")


def task_toml(cand: Candidate, classes: tuple[str, ...], python: str) -> str:
    """task.toml of a task (Harbor keys, generator provenance in [metadata])."""
    tags = ", ".join(f'"{t}"' for t in ("generated", "package", "feature-deletion", cand.package.name))
    return (f'version = "1.0"\n\n[metadata]\nauthor_name = "composer2_jax.bench.authoring.generate_package"\n'
            f'difficulty = "{generate.difficulty(cand)}"\ncategory = "feature-deletion"\ntags = [{tags}]\n'
            f'generator = "package-deletion"\ngenerator_version = {GENERATOR_VERSION}\n'
            f'package = {json.dumps(cand.package.origin)}\nsource = "{cand.source}"\n'
            f'test_source = "{cand.test_file}"\nfunction = "{cand.function}"\ndeleted_lines = {cand.lines}\n'
            f'test_classes = [{", ".join(repr(c) for c in classes)}]\nverified_with = "{python}"\n\n'
            '[verifier]\ntimeout_sec = 120.0\n\n[agent]\ntimeout_sec = 900.0\n\n'
            '[environment]\ncpus = 1\nmemory_mb = 1024\nstorage_mb = 256\nallow_internet = false\n')


def write_task(out_dir: Path, cand: Candidate, classes: tuple[str, ...], python: str) -> Path:
    """Write the task folder of a verified candidate; its path."""
    root = out_dir / cand.name
    repo = root / "environment" / "repo"
    repo.mkdir(parents=True)
    vendor(cand.package, repo, _hidden_tests(cand), {cand.rel: _deleted(cand)})
    (repo / "README.md").write_text(f"# {PREFIX}{cand.package.name}\n\nA vendored copy of the `{cand.package.name}` "
                                    f"package: `import {PREFIX}{cand.package.name}`.\n")
    (root / "instruction.md").write_text(instruction(cand))
    (root / "task.toml").write_text(task_toml(cand, classes, python))
    (root / "solution").mkdir()
    original = cand.source.read_text(errors="replace").splitlines(keepends=True)
    (root / "solution" / f"{cand.function}.py.txt").write_text("".join(original[cand.start - 1:cand.end]))
    (root / "solution" / "solve.sh").write_text(_SOLVE_SH.format(
        function=cand.function, path=f"{PREFIX}{cand.package.name}/{cand.rel}", line=cand.start - 1))
    write_verifier(root, cand, classes, python)
    return root


def generate_tasks(out_dir: str | os.PathLike, count: int, packages: tuple[str, ...], seed: int = 0,
                   python: str | None = None, per_module: int = 2, cache: str | None = None) -> list[Path]:
    """Write up to `count` verified tasks (at most per_module per module) from the packages into out_dir."""
    python = python or SandboxConfig().python
    out = Path(out_dir)
    pool = [c for spec in packages for c in candidates(open_package(spec, cache))]
    return generate.write_verified(pool, out, count, seed, per_module, lambda c: verify(c, python),
                                   lambda c, classes: write_task(out, c, classes, python),
                                   rejected=(ValueError, verdict_record.VerdictError))


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    p = argparse.ArgumentParser(prog="python -m composer2_jax.bench.authoring.generate_package",
                                description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="suite folder to write task folders into")
    p.add_argument("--package", action="append", required=True, help="NAME, DIR[::NAME], wheel or sdist (repeat)")
    p.add_argument("--count", type=int, default=10, help="tasks to write")
    p.add_argument("--seed", type=int, default=0, help="order in which candidates are tried")
    p.add_argument("--per-module", type=int, default=2, help="most tasks per module")
    args = p.parse_args(argv)
    try:
        paths = generate_tasks(args.out, args.count, tuple(args.package), args.seed, per_module=args.per_module)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    print(f"wrote {len(paths)} tasks to {args.out}", file=sys.stderr)
    return 0 if paths else 1


if __name__ == "__main__":
    sys.exit(main())
