"""Mutation grading of the agent's tests (hidden verifier).

The agent's tests (run with `spec["command"]` from the repository root) must
  1. pass on the code as shipped (tests/original/ is copied over the workspace's files first),
  2. pass on every behaviour-preserving rewrite in tests/equivalents/<name>/ (so tests cannot pin the source text),
  3. fail on every planted bug in tests/mutants/<name>/,
and run at least spec["min_tests"] tests. Exit status 0 iff all hold; details on stdout.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def overlay(repo, files_dir):
    """Copy every file under files_dir into repo at the same relative path."""
    for root, _, names in os.walk(files_dir):
        for name in names:
            src = os.path.join(root, name)
            dst = os.path.join(repo, os.path.relpath(src, files_dir))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)


def run_tests(repo, spec):
    """(exit code, tests ran, output tail) of the agent's tests in repo."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    try:
        r = subprocess.run(spec["command"], cwd=repo, capture_output=True, text=True, timeout=spec["timeout_s"], env=env)
    except subprocess.TimeoutExpired:
        return -1, 0, "timed out"
    out = r.stdout + r.stderr
    ran = re.findall(r"^Ran (\d+) tests?", out, re.M)
    return r.returncode, int(ran[-1]) if ran else 0, out[-1500:]


def variant(base, pristine, files_dir):
    """A fresh copy of the pristine repo with files_dir laid over it."""
    d = tempfile.mkdtemp(dir=base)
    shutil.rmtree(d)
    shutil.copytree(pristine, d)
    overlay(d, files_dir)
    return d


def main():
    with open(os.path.join(HERE, "mutation.json")) as f:
        spec = json.load(f)
    base = tempfile.mkdtemp()
    pristine = os.path.join(base, "pristine")
    shutil.copytree(os.getcwd(), pristine, ignore=shutil.ignore_patterns("__pycache__", ".git"))
    overlay(pristine, os.path.join(HERE, "original"))
    code, ran, out = run_tests(pristine, spec)
    print(f"original: exit {code}, {ran} tests")
    ok = code == 0 and ran >= spec["min_tests"]
    if not ok:
        print(f"FAIL: the tests must pass on the shipped code and run >= {spec['min_tests']} tests\n{out}")
    for kind, must_pass in (("equivalents", True), ("mutants", False)):
        folder = os.path.join(HERE, kind)
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            code, ran, out = run_tests(variant(base, pristine, os.path.join(folder, name)), spec)
            good = (code == 0) if must_pass else (code != 0)
            print(f"{kind[:-1]} {name}: exit {code} -> {'ok' if good else 'FAIL'}")
            if not good:
                ok = False
                print(("tests fail on a behaviour-preserving rewrite" if must_pass else "mutant survived") + f"\n{out}")
    shutil.rmtree(base, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
