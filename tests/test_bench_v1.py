"""Suite v1: validation (oracle 1, null 0, every negative 0) of one task end to end in the fast suite and of every
task as a slow test; the suite's shape (negatives, pinned real releases, instruction length); the machinery
(negatives stay on the host, a negative that does not apply is a failure, the comparison table)."""

import json
import subprocess
from pathlib import Path

import pytest

from composer2_jax.bench import validate
from composer2_jax.bench.authoring import sdist_repo
from composer2_jax.bench.authoring.negatives import FOLDER, negatives
from composer2_jax.bench.task import load_suite
from composer2_jax.env.transfer import pack_dir
from composer2_jax.verify.verdict import HOST_ONLY, RUNNER
from tests.markers import needs_sandbox

SUITE = load_suite("v1")
TASKS = [t.name for t in SUITE.tasks]
# Evidence tasks draw fresh weeks of logs on every trial (minutes each): their validation and their fresh-week checks
# are slow tests of their own files (test_bench_v1_evidence.py, test_bench_v1_weeks.py), so that CI's two workers
# share the slow step.
EVIDENCE = [t.name for t in SUITE.tasks if t.category == "evidence"]
FAST_TASK = "real-semver-subclass-replace"  # the one task validated end to end in the fast suite (≈ 30 s)


def _validate(names):
    from composer2_jax.env import Environment, SandboxLimits

    with Environment(pool_size=3, limits=SandboxLimits(timeout_s=600)) as env:
        return validate.validate(env, SUITE.select(names), workers=3)


@needs_sandbox
def test_one_task_validates_end_to_end():
    (v,) = _validate([FAST_TASK])
    assert v.ok, v.problems
    negs = [k for k in v.rewards if k.startswith("negative:")]
    assert v.rewards["oracle"] == 1.0 and v.rewards["null"] == 0.0 and len(negs) >= validate.MIN_NEGATIVES
    assert all(v.rewards[k] == 0.0 for k in negs), v.rewards


@needs_sandbox
@pytest.mark.slow
def test_every_task_validates():  # but the evidence tasks: tests/test_bench_v1_evidence.py
    results = _validate([n for n in TASKS if n not in EVIDENCE])
    bad = {v.task: v.problems for v in results if not v.ok}
    assert not bad, bad


@pytest.mark.parametrize("task", TASKS)
def test_task_folder(task):
    t = next(x for x in SUITE.tasks if x.name == task)
    assert len(negatives(t)) >= validate.MIN_NEGATIVES, task
    assert t.solution_dir is not None and not t.config.allow_internet
    assert (t.tests_dir / RUNNER.name).read_bytes() == RUNNER.read_bytes()
    committed = sum(p.stat().st_size for p in t.path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    assert committed < 1_000_000, f"{task} commits {committed} bytes; generate data at build time instead"
    if (t.repo_source / sdist_repo.PIN).is_file():  # a pinned release fetched at build time, by the shared script
        # the shared script itself, or — a task that writes data after the build — a copy of it next to generate.py
        copy = t.generator.parent / "sdist_repo.py"
        fetcher = copy if copy.is_file() else t.generator
        assert fetcher.read_bytes() == Path(sdist_repo.__file__).read_bytes(), task
        pin = json.loads((t.repo_source / sdist_repo.PIN).read_text())
        assert set(pin) == {"package", "version", "file", "sha256"} and len(pin["sha256"]) == 64, pin
        shipped = sorted(p.name for p in t.repo_source.iterdir())
        if t.category == "real-history":  # the release plus the next release's first step, replayed as commits
            assert shipped == [sdist_repo.HISTORY, sdist_repo.PIN], shipped
            assert list((t.repo_source / sdist_repo.HISTORY).glob("*.patch")), task
            assert t.config.metadata.get("upstream"), f"{task}: name the upstream release and changelog entry"
        elif t.category.startswith("real-"):  # the release as it is; the later release is the hidden truth
            assert shipped == [sdist_repo.PIN], shipped
            assert t.config.metadata.get("upstream"), f"{task}: name the upstream release and changelog entry"
        else:  # written here on a release: commits of ours on top, replayed by the script
            assert shipped == [sdist_repo.HISTORY, sdist_repo.PIN], shipped
            assert list((t.repo_source / sdist_repo.HISTORY).glob("*.patch")), task
    else:
        assert not t.category.startswith("real-"), f"{task}: a real-repository task needs a pinned release"


@pytest.mark.slow  # fetches the release from the registry on a fresh host
@pytest.mark.parametrize("task", [t.name for t in SUITE.tasks if (t.repo_source / sdist_repo.PIN).is_file()
                                  and (t.repo_source / sdist_repo.HISTORY).is_dir()])
def test_history_is_replayed_as_commits(task):
    t = next(x for x in SUITE.tasks if x.name == task)
    log = subprocess.run(["git", "-C", str(t.repo_dir()), "log", "--format=%s"], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    patches = sorted((t.repo_source / sdist_repo.HISTORY).glob("*.patch"))
    assert len(log) == 1 + len(patches) and not (t.repo_dir() / sdist_repo.HISTORY).exists(), log


def test_versions_changelog_lists_every_task():
    text = (SUITE.path.parent / "VERSIONS.md").read_text()
    assert "| v1 |" in text
    assert not [n for n in TASKS if f"`{n}`" not in text]


def test_negatives_stay_on_the_host(tmp_path):
    tests = tmp_path / "tests"
    (tests / FOLDER).mkdir(parents=True)
    (tests / FOLDER / "wrong.patch").write_text("--- a/x\n+++ b/x\n")
    (tests / "expected.json").write_text("{}")
    (tests / "probes.py").write_text("")
    import base64
    import io
    import tarfile
    names = tarfile.open(fileobj=io.BytesIO(base64.b64decode(pack_dir(tests, HOST_ONLY)))).getnames()
    assert names == ["probes.py"], names


def test_a_negative_that_does_not_apply_is_a_problem(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "m.py").write_text("x = 1\n")
    good, bad = tmp_path / "good.patch", tmp_path / "bad.patch"
    good.write_text("--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n")
    bad.write_text("--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 3\n+x = 2\n")
    assert validate.patch_applies(good, repo) is None
    assert "FAILED" in validate.patch_applies(bad, repo) or "failed" in validate.patch_applies(bad, repo)
    assert (repo / "m.py").read_text() == "x = 1\n"  # a dry run writes nothing


def test_judge_requires_oracle_one_null_zero_negatives_zero():
    from composer2_jax.bench.runner import Trial

    def trial(reward, passed=False):
        return Trial("t", "c", "easy", 0, reward=reward, passed=passed)

    ok = validate.judge("t", {"oracle": trial(1.0, True), "null": trial(0.0), "negative:a": trial(0.0)})
    assert ok.ok
    leaky = validate.judge("t", {"oracle": trial(1.0, True), "null": trial(0.0), "negative:a": trial(1.0, True)})
    assert leaky.problems == ["negative:a scores 1.0; expected 0"]
    weak = validate.judge("t", {"oracle": trial(0.0), "null": trial(0.0)})
    assert weak.problems == ["oracle scores 0.0; expected 1"]


def test_sdist_repo_refuses_a_wrong_digest(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPOSER2_SDIST_CACHE", str(tmp_path))
    (tmp_path / "p-1.tar.gz").write_bytes(b"not the release")
    with pytest.raises(ValueError, match="expected the pinned"):
        sdist_repo.fetch({"package": "p", "version": "1", "file": "p-1.tar.gz", "sha256": "0" * 64})


def test_sdist_repo_builds_a_committed_tree(tmp_path, monkeypatch):
    import tarfile
    monkeypatch.setenv("COMPOSER2_SDIST_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "p-1"
    (src / "p.egg-info").mkdir(parents=True)
    (src / "p.py").write_text("VALUE = 1\n")
    (src / "PKG-INFO").write_text("Name: p\n")
    (src / "p.egg-info" / "SOURCES.txt").write_text("p.py\n")
    (tmp_path / "cache").mkdir()
    archive = tmp_path / "cache" / "p-1.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(src, arcname="p-1")
    repo = tmp_path / "repo"
    repo.mkdir()
    pin = {"package": "p", "version": "1", "file": "p-1.tar.gz", "sha256": sdist_repo.sha256(str(archive))}
    (repo / sdist_repo.PIN).write_text(json.dumps(pin))
    sdist_repo.build(str(repo))
    assert sorted(p.name for p in repo.iterdir() if p.name != ".git") == ["p.py"]
    log = subprocess.run(["git", "-C", str(repo), "log", "--format=%s"], capture_output=True, text=True, check=True)
    assert log.stdout.strip() == "p 1"


def test_sdist_repo_replays_history_on_crlf_sources(tmp_path):
    """A release whose files end lines with CRLF (lark's) takes a history patch with its CRs kept."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "m.py").write_bytes(b"A = 1\r\nB = 2\r\n")
    sdist_repo.commit(str(repo), "release")
    history = tmp_path / "history"
    history.mkdir()
    (history / "001-b.patch").write_bytes(b"Change B\n\ndiff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n"
                                          b"@@ -1,2 +1,2 @@\n A = 1\r\n-B = 2\r\n+B = 3\r\n")
    assert sdist_repo.replay(str(repo), str(history)) == 1
    assert (repo / "m.py").read_bytes() == b"A = 1\r\nB = 3\r\n"


def test_vague_instructions_name_nothing_of_the_repository(tmp_path):
    from benchmarks.tasks.suite_table import vague
    (tmp_path / "feed.py").write_text("def list_feed(store):\n    pass\n")
    assert vague("Posts go missing when people scroll on busy accounts.", tmp_path)
    assert not vague("Posts go missing in feed.py when people scroll.", tmp_path)
    assert not vague("The list_feed endpoint skips posts.", tmp_path)
    assert not vague("Fix `paging` please.", tmp_path)
    assert not vague("word " * 41, tmp_path)


def test_suite_table_measures_a_reference_change(tmp_path):
    from benchmarks.tasks.suite_table import reference_change, repo_stats, summary, task_row, write_doc
    task = next(t for t in SUITE.tasks if t.name == FAST_TASK)
    row = task_row(task)
    assert row["ref_files"] >= 2 and row["ref_lines"] >= 20 and row["repo_files"] > 40 and row["hidden_tests"] >= 15
    assert row["vague"] and row["evidence_files"] == 0
    repo = tmp_path / "r"
    (repo / "logs").mkdir(parents=True)
    (repo / "a.py").write_text("1\n2\n")
    (repo / "logs" / "x.json").write_text("{}")
    assert repo_stats(repo) == {"repo_files": 1, "repo_lines": 2, "evidence_files": 1, "evidence_bytes": 2}
    assert summary([row])["ref_lines"] == row["ref_lines"] and reference_change(task, task.repo_dir()) == {
        "ref_files": row["ref_files"], "ref_lines": row["ref_lines"]}
    doc = tmp_path / "doc.md"
    doc.write_text("a\n<!-- suite-table:begin -->\nold\n<!-- suite-table:end -->\nb\n")
    write_doc("| new |", doc)
    assert doc.read_text() == "a\n<!-- suite-table:begin -->\n| new |\n<!-- suite-table:end -->\nb\n"


def test_no_constant_answer_passes_a_v1_task():
    """A child answering one constant everywhere fails every v1 task (some expected value is not a constant)."""
    from composer2_jax.verify import verdict
    from composer2_jax.verify import verdict_runner as vr

    for t in SUITE.tasks:
        expected = verdict.load_expected(t.tests_dir)
        for c in (True, False, None, 0, 1, "", [], {"dict": []}):
            assert vr.judge({n: c for n in expected["probes"]}, expected)["reward"] == 0.0, (t.name, c)


def test_f1_bound_of_label_specs():
    from composer2_jax.verify import verdict_runner as vr

    labels = [True] * 10 + [False] * 90
    spec = {"version": 1, "probes": {"d": {"labels": labels, "f1": 0.9}}}
    nine_of_ten = [True] * 9 + [False] * 91  # F1 = 18 / 19
    one_false_alarm_each = [True] * 10 + [True] * 3 + [False] * 87  # F1 = 20 / 23 < 0.9
    assert vr.judge({"d": nine_of_ten}, spec)["reward"] == 1.0
    assert vr.judge({"d": one_false_alarm_each}, spec)["reward"] == 0.0


def test_release_diff_adds_and_removes_files(tmp_path):
    """A file only the later release has (or only the earlier) is diffed against /dev/null with plain a/ b/ names,
    so `patch -p1` creates (or deletes) it in the earlier release's tree."""
    import tarfile

    from benchmarks.tasks.release_diff import release_diff

    def sdist(name, files):
        src = tmp_path / name
        for rel, text in files.items():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            (src / rel).write_text(text)
        archive = tmp_path / f"{name}.tar.gz"
        with tarfile.open(archive, "w:gz") as tf:
            tf.add(src, arcname=name)
        return str(archive)

    old = sdist("p-1", {"src/p/a.py": "A = 1\n", "src/p/gone.py": "G = 1\n"})
    new = sdist("p-2", {"src/p/a.py": "A = 2\n", "src/p/version.py": "V = '2'\n"})
    diff = release_diff(old, new, ["src/p/a.py", "src/p/gone.py", "src/p/version.py"])
    headers = [line for line in diff.splitlines() if line.startswith(("diff --git", "--- ", "+++ "))]
    assert headers == ["diff --git a/src/p/a.py b/src/p/a.py", "--- a/src/p/a.py", "+++ b/src/p/a.py",
                       "diff --git a/src/p/gone.py b/src/p/gone.py", "--- a/src/p/gone.py", "+++ /dev/null",
                       "diff --git a/src/p/version.py b/src/p/version.py", "--- /dev/null", "+++ b/src/p/version.py"]
    repo = tmp_path / "repo"
    sdist_repo.unpack(old, str(repo))
    subprocess.run(["patch", "-p1", "-s", "-d", str(repo)], input=diff, text=True, check=True)
    assert sorted(str(p.relative_to(repo)) for p in repo.rglob("*.py")) == ["src/p/a.py", "src/p/version.py"]
    with pytest.raises(SystemExit, match="in neither release"):
        release_diff(old, new, ["src/p/missing.py"])
