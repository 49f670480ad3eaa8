"""Shared task files (bench/shared_files.py): the suites commit no copy of the verdict runner or of the pinned-release
script; loading a task installs them byte-identical to the repository's one file; `python -m composer2_jax.bench
export` writes self-contained folders equal to the committed folder plus those files, which grade as the suite does."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from composer2_jax.bench import export, shared_files
from composer2_jax.bench.task import SUITES_DIR, load_suite, load_task
from tests.markers import needs_sandbox

REPO = SUITES_DIR.parents[1]
# one task of each kind: a v0 task judged by the verdict runner; a real-repository task whose generate.py is the
# shared script; an evidence task whose own generator loads the shared script beside it
SAMPLE = {"bug-config-equals": ("v0", {"tests/verdict_runner.py"}),
          "real-semver-subclass-replace": ("v1", {"tests/verdict_runner.py", "environment/generate.py"}),
          "evidence-export-cursor-skip": ("v1", {"tests/verdict_runner.py", "environment/sdist_repo.py"})}


def _tracked(path: Path) -> list[str]:
    """Files git tracks under path, relative to it."""
    out = subprocess.run(["git", "ls-files", "-z", "--", str(path)], cwd=REPO, capture_output=True, check=True)
    return sorted(str((REPO / p).relative_to(path)) for p in out.stdout.decode().split("\0") if p)


def _files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def test_no_suite_commits_a_shared_copy():
    tracked = set(_tracked(SUITES_DIR))
    folders = [p.parent for p in SUITES_DIR.glob("v*/*/task.toml")]
    assert len(folders) >= 100, len(folders)
    needing = 0
    for task in folders:
        shared = shared_files.shared_files(task)
        needing += bool(shared)
        committed = {rel for rel in shared if str(task.relative_to(SUITES_DIR) / rel) in tracked}
        assert not committed, f"{task.name} commits {sorted(committed)}; they are installed when the task loads"
    assert needing == len(folders)  # every suite task is judged by the verdict runner


@pytest.mark.parametrize("name", sorted(SAMPLE))
def test_shared_files_are_the_repository_files(name):
    suite, want = SAMPLE[name]
    task = SUITES_DIR / suite / name
    shared = shared_files.shared_files(task)
    assert set(shared) == want
    load_task(task)  # installs them
    for rel, source in shared.items():
        assert (task / rel).read_bytes() == source.read_bytes(), rel


def test_install_writes_missing_and_stale_copies_only(tmp_path):
    _, want = SAMPLE["evidence-export-cursor-skip"]
    task = export.export_task(SUITES_DIR / "v1" / "evidence-export-cursor-skip", tmp_path)
    for rel in want:
        (task / rel).unlink()
    assert sorted(str(p.relative_to(task)) for p in shared_files.install(task)) == sorted(want)
    (task / "tests" / "verdict_runner.py").write_text("print('stale')\n")
    assert shared_files.install(task) == [task / "tests" / "verdict_runner.py"]
    assert shared_files.install(task) == []
    assert (task / "tests" / "verdict_runner.py").read_bytes() == shared_files.RUNNER.read_bytes()
    # the task's own generator is kept: the shared script goes beside it
    assert b"sdist_repo.py" in (task / "environment" / "generate.py").read_bytes()
    assert (task / "environment" / "generate.py").read_bytes() != shared_files.SDIST.read_bytes()


@pytest.mark.parametrize("name", sorted(SAMPLE))
def test_exported_folder_is_the_committed_folder_plus_the_shared_files(tmp_path, name):
    suite, want = SAMPLE[name]
    source = SUITES_DIR / suite / name
    dest = export.export_task(source, tmp_path)
    expected = {rel: (source / rel).read_bytes() for rel in _tracked(source)}
    expected.update({rel: shared_files.shared_files(source)[rel].read_bytes() for rel in want})
    got = _files(dest)
    assert sorted(got) == sorted(expected)
    assert [rel for rel in expected if got[rel] != expected[rel]] == []


def test_export_command_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "composer2_jax.bench", "export", "--suite", "v0", "--out",
                          str(tmp_path), "--tasks", "bug-config-equals"], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    (line,) = [json.loads(x) for x in run.stdout.splitlines()]
    assert line == {"task": "bug-config-equals", "out": str(tmp_path / "bug-config-equals"),
                    "installed": ["tests/verdict_runner.py"]}
    bad = subprocess.run([sys.executable, "-m", "composer2_jax.bench", "export", "--suite", "v0", "--out",
                          str(tmp_path / "x"), "--tasks", "no-such-task"], cwd=REPO, capture_output=True, text=True)
    assert bad.returncode != 0 and "no-such-task" in bad.stderr
    assert "usage" in subprocess.run([sys.executable, "-m", "composer2_jax.bench"], cwd=REPO, capture_output=True,
                                     text=True).stderr
    with pytest.raises(FileExistsError, match="bug-config-equals"):
        export.export_task(SUITES_DIR / "v0" / "bug-config-equals", tmp_path)


@needs_sandbox
def test_an_exported_task_grades_like_the_suite(tmp_path):
    from composer2_jax.bench import validate
    from composer2_jax.env import Environment, SandboxLimits

    export.main(["--suite", "v0", "--out", str(tmp_path / "suite"), "--tasks", "bug-config-equals"])
    with Environment(pool_size=2, limits=SandboxLimits(timeout_s=120)) as env:
        (v,) = validate.validate(env, load_suite(tmp_path / "suite"), workers=2)
    assert v.rewards["oracle"] == 1.0 and v.rewards["null"] == 0.0, v.rewards


def test_record_sync_installs_into_every_task_under_a_root(tmp_path):
    from composer2_jax.bench.authoring import record

    for name in ("bug-config-equals", "real-semver-subclass-replace"):
        export.export_task(SUITES_DIR / SAMPLE[name][0] / name, tmp_path)
    (tmp_path / "bug-config-equals" / "tests" / "verdict_runner.py").unlink()
    (tmp_path / "real-semver-subclass-replace" / "environment" / "generate.py").write_text("# stale\n")
    assert record.sync(tmp_path) == [tmp_path / "bug-config-equals" / "tests" / "verdict_runner.py",
                                     tmp_path / "real-semver-subclass-replace" / "environment" / "generate.py"]
    assert record.sync(tmp_path) == []
