"""Files many tasks share, kept once in the repository and installed into a task folder when the task is loaded.

    tests/verdict_runner.py    verify/verdict_runner.py, in every task judged by the verdict protocol (tests/check.json)
    environment/generate.py    bench/authoring/sdist_repo.py, in a task whose starting repository is a pinned release
                               (environment/repo/.sdist.json) and that has no generator of its own
    environment/sdist_repo.py  the same script beside a task's own generator that loads it by name (the evidence
                               tasks: their generate.py builds the release, then writes the week of logs)

The suites under benchmarks/tasks/ commit none of these copies (benchmarks/tasks/.gitignore): `bench.task.load_task`
installs them, byte-identical to the repository's one file, before a task is built or graded, and
`python -m composer2_jax.bench export` writes self-contained task folders that run unchanged under Harbor. A task's
own generator is told apart from an installed copy of the shared script by what it says: it names "sdist_repo.py".
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from composer2_jax.bench.authoring import sdist_repo
from composer2_jax.verify import verdict_runner

RUNNER = Path(verdict_runner.__file__).resolve()
SDIST = Path(sdist_repo.__file__).resolve()
OWN_GENERATOR_MARK = b'"sdist_repo.py"'  # how a task's own generator loads the shared script beside it


def shared_files(task_dir: Path) -> dict[str, Path]:
    """{path relative to the task folder: the repository file installed there} for one task folder."""
    out = {}
    if (task_dir / "tests" / "check.json").is_file():
        out[f"tests/{RUNNER.name}"] = RUNNER
    env = task_dir / "environment"
    if (env / "repo" / sdist_repo.PIN).is_file():
        gen = env / "generate.py"
        own = gen.is_file() and OWN_GENERATOR_MARK in gen.read_bytes()
        out[f"environment/{SDIST.name}" if own else "environment/generate.py"] = SDIST
    return out


def install(task_dir: str | os.PathLike) -> list[Path]:
    """Write every shared file the task folder lacks or holds stale (atomically); the paths written."""
    task_dir = Path(task_dir)
    written = []
    for rel, source in shared_files(task_dir).items():
        target = task_dir / rel
        data = source.read_bytes()
        if target.is_file() and target.read_bytes() == data:
            continue
        if not os.access(target.parent, os.W_OK):
            raise PermissionError(f"{target}: the task needs {source.name} installed here, and {target.parent} is "
                                  "not writable; expected a writable task folder, or one exported with "
                                  "`python -m composer2_jax.bench export`")
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
        written.append(target)
    return written
