"""Self-contained task folders: a suite's tasks with their shared files installed, to run unchanged under Harbor.

    python -m composer2_jax.bench export --suite v1 --out DIR                  # every task of suite v1 (or a folder)
    python -m composer2_jax.bench export --suite v1 --out DIR --tasks a,b      # only these tasks

Each task folder is copied whole (caches such as __pycache__ left out) with the files it shares with other tasks
installed (bench/shared_files.py: the verdict runner in tests/, the pinned-release script in environment/), so the
folder needs nothing from this repository: Harbor builds and grades it as it is.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from composer2_jax.bench import shared_files
from composer2_jax.bench.task import suite_path

IGNORED = ("__pycache__", "*.pyc")


def task_folders(suite: str | Path, names: list[str] | None = None) -> list[Path]:
    """The task folders of a suite (folders holding task.toml), or the named ones; an unknown name is an error."""
    root = suite_path(suite)
    found = {p.name: p for p in sorted(root.iterdir()) if (p / "task.toml").is_file()}
    if names:
        unknown = sorted(set(names) - set(found))
        if unknown:
            raise ValueError(f"tasks {unknown} are not in suite {str(root)!r}; expected names among {sorted(found)}")
        return [found[n] for n in names]
    return list(found.values())


def export_task(task_dir: Path, out: Path) -> Path:
    """Copy one task folder to out/NAME with its shared files installed; the new folder."""
    dest = out / task_dir.name
    if dest.exists():
        raise FileExistsError(f"{dest} exists; expected an empty --out folder (or one without this task)")
    shutil.copytree(task_dir, dest, symlinks=True, ignore=shutil.ignore_patterns(*IGNORED))
    shared_files.install(dest)
    return dest


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    p = argparse.ArgumentParser(prog="python -m composer2_jax.bench export", description=__doc__.splitlines()[0])
    p.add_argument("--suite", required=True, help="a suite name under benchmarks/tasks/ (v0, v1) or a folder of tasks")
    p.add_argument("--out", required=True, help="folder to write the task folders into (created if missing)")
    p.add_argument("--tasks", default="", help="comma-separated task names (default: every task of the suite)")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = [n for n in args.tasks.split(",") if n]
    for task_dir in task_folders(args.suite, names):
        dest = export_task(task_dir, out)
        installed = sorted(shared_files.shared_files(dest))
        print(json.dumps({"task": task_dir.name, "out": str(dest), "installed": installed}))
    return 0
