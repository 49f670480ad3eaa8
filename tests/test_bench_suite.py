"""Validation of benchmark suite v0, for every task: the oracle (solution/solve.sh, driven through the harness like any
agent) passes the hidden tests and the untouched repository fails them. Plus the suite's shape: size, categories,
difficulties, repository sizes, committed bytes, and the VERSIONS changelog.

All trials run up front in parallel sandboxes on one Environment; each task's repository is imported once and both
agents fork it. The per-task tests then only read the results.
"""

import functools
import re
from pathlib import Path

import pytest

from composer2_jax.bench import policies
from composer2_jax.bench.runner import SnapshotCache, run_suite
from composer2_jax.bench.task import SUITES_DIR, load_suite
from composer2_jax.env.harness import HarnessConfig
from tests.markers import needs_sandbox

SUITE = load_suite("v0")
TASKS = [t.name for t in SUITE.tasks]
CATEGORIES = ("bug", "logs", "refactor", "feature", "config", "tests")


@functools.cache
def results() -> dict[str, dict]:
    """{agent: {task: Trial}} for the oracle and the null agent over the whole suite (run once per session)."""
    from composer2_jax.env import Environment, SandboxLimits

    config = HarnessConfig(max_turns=50)
    out = {}
    with Environment(pool_size=4, limits=SandboxLimits(timeout_s=120)) as env:
        snaps = SnapshotCache(env)
        for name in ("oracle", "null"):
            trials = run_suite(env, SUITE, policies.make_agent(name, config), workers=4, snapshots=snaps)
            out[name] = {t.task: t for t in trials}
    return out


@needs_sandbox
@pytest.mark.parametrize("task", TASKS)
def test_oracle_passes(task):
    t = results()["oracle"][task]
    assert t.error is None, t.error
    assert t.passed and t.reward == 1.0 and t.stop_reason == "submitted", (t.reward, t.stop_reason, t.grade_error)
    assert t.malformed == 0, t.notes


@needs_sandbox
@pytest.mark.parametrize("task", TASKS)
def test_untouched_repository_fails(task):
    t = results()["null"][task]
    assert t.error is None and t.grade_error is None, (t.error, t.grade_error)
    assert not t.passed and t.reward == 0.0


def test_suite_shape():
    handwritten = [t for t in SUITE.tasks if not t.name.startswith("gen")]
    assert len(handwritten) >= 30 and not SUITE.unsupported
    cats = {t.category for t in handwritten}
    assert set(CATEGORIES) <= cats, cats
    for c in CATEGORIES:
        assert {t.difficulty for t in handwritten if t.category == c} <= {"easy", "medium", "hard"}
    assert {t.difficulty for t in handwritten} == {"easy", "medium", "hard"}
    generated = [t for t in SUITE.tasks if t.name.startswith("gen")]
    assert generated and all(re.match(r"gen\d+-", t.name) and t.category == "feature-deletion" for t in generated)


@pytest.mark.parametrize("task", TASKS)
def test_task_folder(task):
    t = next(x for x in SUITE.tasks if x.name == task)
    assert t.solution_dir is not None and t.instruction.strip()
    assert t.config.difficulty in ("easy", "medium", "hard") and t.config.tags
    assert not t.config.allow_internet
    committed = sum(p.stat().st_size for p in t.path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    assert committed < 1_000_000, f"{task} commits {committed} bytes; keep tasks under 1 MB (generate data instead)"
    if not task.startswith("gen"):
        source_files = [p for p in t.repo_source.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        assert 3 <= len(source_files) <= 12, (task, len(source_files))
        assert not (t.repo_source / "detect.py").exists()
    assert (t.tests_dir / "test.sh").read_text().count("reward.txt") >= 1


def test_versions_changelog_lists_every_task():
    text = (SUITES_DIR / "VERSIONS.md").read_text()
    missing = [name for name in TASKS if f"`{name}`" not in text]
    assert not missing, f"benchmarks/tasks/VERSIONS.md does not list {missing}"
    assert "| v0 |" in text


def test_log_tasks_generate_hundreds_of_logs(tmp_path):
    for t in SUITE.tasks:
        if t.category == "logs":
            repo = t.repo_dir(tmp_path)
            assert len(list((repo / "logs").iterdir())) >= 200, t.name
            assert Path(t.repo_dir(tmp_path)) == repo  # materialised once
            copies = list(t.tests_dir.glob("gen_*.py"))  # the hidden tests draw fresh logs with the same generator
            assert len(copies) == 1 and copies[0].read_text() == t.generator.read_text(), t.name
