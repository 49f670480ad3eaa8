"""Verdicts outside the code's reach (verify/verdict_runner.py, verify/verdict.py): the value encoding and the
judge by hand-computed cases, the runner's protocol against children that misbehave (on the host, with probes that
stay inside their own process tree), and the zoo of forging policies (bench/authoring/forgeries.py) graded in real
sandboxes by the real graders: every policy scores 0 on every task kind and the oracle scores 1.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from composer2_jax.bench.authoring import forgeries as forging
from composer2_jax.env import testing as envtest
from composer2_jax.verify import verdict
from composer2_jax.verify import verdict_runner as vr
from tests.markers import needs_sandbox

# ------------------------------------------------------------------------------------------------ encoding


class LyingInt(int):
    """An int that claims to equal everything."""

    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


class LyingStr(str):
    """A str whose repr claims to be something else."""

    def __repr__(self):
        return "'expected'"


def test_encode_is_exact_and_canonical():
    import datetime
    from decimal import Decimal

    assert vr.encode([1, "a", None, True]) == [1, "a", None, True]
    assert vr.encode((1.5, b"\x00\xff")) == {"tuple": [{"float": "1.5"}, {"bytes": "00ff"}]}
    assert vr.encode({"b": 1, "a": 2}) == vr.encode({"a": 2, "b": 1}) == {"dict": [["a", 2], ["b", 1]]}
    assert vr.encode({3, 1, 2}) == {"set": [1, 2, 3]}
    assert vr.encode(Decimal("2.50")) == {"decimal": "2.50"}
    assert vr.encode(datetime.date(2024, 3, 4)) == {"date": "2024-03-04"}
    for bad in (LyingInt(3), LyingStr("x"), object(), [1, object()]):
        with pytest.raises(vr.Unencodable):
            vr.encode(bad)
    deep = []
    for _ in range(vr.MAX_DEPTH + 2):
        deep = [deep]
    with pytest.raises(vr.Unencodable, match="nesting deeper"):
        vr.encode(deep)
    value = {"k": (1, 2.5, b"x", frozenset({"a"})), "n": [None, {"z": Decimal("1.1")}]}
    assert vr.decode(vr.encode(value)) == value


def test_match_and_judge_by_hand():
    assert vr.match(2, {"value": {"float": "2.0"}})  # 2 == 2.0, as in Python
    assert not vr.match(True, {"value": 1})  # but a bool is not an int
    assert not vr.match([1, 2], {"value": {"tuple": [1, 2]}})  # nor a list a tuple
    assert vr.match({"float": "0.30000000000000004"}, {"approx": {"float": "0.3"}, "rel": 0, "abs": 1e-9})
    assert not vr.match({"float": "0.31"}, {"approx": {"float": "0.3"}, "rel": 0, "abs": 1e-9})
    assert vr.match("abc", {"sha256": "6cc43f858fbb763301637b5af970e2a46b46f461f27e5a0f41e009c59b827b25"})
    labels = [True] * 10 + [False] * 10
    five_wrong = [not x for x in labels[:5]] + labels[5:]
    assert vr.match(five_wrong, {"labels": labels, "wrong_at_most": 5})
    assert not vr.match(five_wrong, {"labels": labels, "wrong_at_most": 4})
    # recall 8/10, precision 8/9: passes at 0.8, fails at 0.9
    answer = [True] * 8 + [False] * 2 + [True] + [False] * 9
    assert vr.match(answer, {"labels": labels, "precision": 0.8, "recall": 0.8})
    assert not vr.match(answer, {"labels": labels, "precision": 0.9, "recall": 0.8})
    assert not vr.match([1] * 20, {"labels": labels, "wrong_at_most": 20})  # answers must be booleans
    fields = {"fields": {"ok": {"value": True}, "ran": {"at_least": 4}}}
    assert vr.match(vr.encode({"ok": True, "ran": 5}), fields)
    assert not vr.match(vr.encode({"ok": True, "ran": 3}), fields)
    assert not vr.match(True, fields)
    expected = {"probes": {"a": {"value": 1}, "b": {"value": "x"}, "c": {"value": None}}}
    v = vr.judge({"a": 1, "b": "y", "zzz": 1}, expected)
    assert (v["reward"], v["passed"], v["failed"], v["errors"]) == (0.0, 1, 1, 1)
    assert vr.judge({"a": 1, "b": "x", "c": None}, expected)["reward"] == 1.0
    with pytest.raises(ValueError, match="at least one probe"):
        vr.judge({}, {"probes": {}})


# ------------------------------------------------------------------------------------------------ the protocol


def run_runner(tmp: Path, probes: str, expected: dict, workspace: dict | None = None, check: dict | None = None,
               scrub: bool = False) -> tuple[dict, dict]:
    """Run the verdict runner on the host with a probes.py and expected values; (answers.json, verdict.json)."""
    tests, out, repo = tmp / "tests", tmp / "out", tmp / "repo"
    envtest.make_repo(str(repo), workspace or {"README": "x\n"})
    tests.mkdir()
    shutil.copyfile(verdict.RUNNER, tests / verdict.RUNNER_NAME)
    (tests / vr.PROBES).write_text(probes)
    (tests / vr.CHECK).write_text(json.dumps({"version": 1, "timeout_s": 5, **(check or {})}))
    (tests / vr.EXPECTED).write_text(json.dumps({"version": 1, "probes": expected}))
    env = {"PATH": os.environ["PATH"], **({"VERDICT_SCRUB": "1"} if scrub else {})}
    subprocess.run([sys.executable, "-I", "-S", str(tests / verdict.RUNNER_NAME), "--out", str(out)], cwd=repo,
                   env=env, check=True, capture_output=True, timeout=60)
    return json.loads((out / vr.ANSWERS).read_text()), json.loads((out / vr.VERDICT).read_text())


def test_children_that_misbehave_have_not_answered(tmp_path):
    probes = ("import os, sys\n"
              "def probe_first(ctx):\n    return 41 + 1\n"
              "def probe_exits(ctx):\n    sys.exit(0)\n"
              "def probe_fake_line(ctx):\n"  # the pipe is easy to find; the nonce is not guessed
              "    os.write(int(sys.argv[2]), b'{\"nonce\": \"00\", \"name\": \"later\", \"value\": 7}\\n')\n"
              "    return 1\n"
              "def probe_leaves_os(ctx):\n    print('OK'); os._exit(0)\n"
              "def probe_later(ctx):\n    return 7\n")
    answers, v = run_runner(tmp_path, probes, {n: {"value": x} for n, x in
                                               [("first", 42), ("exits", 0), ("fake_line", 1), ("later", 7)]})
    got = answers["answers"]
    assert got["first"] == 42 and got["exits"] == {"dict": [["error", "SystemExit"]]}
    assert got["fake_line"] == 1 and "leaves_os" not in got and "later" not in got  # the wrong nonce was dropped
    assert answers["runs"]["main"]["status"] == "exited before done"
    assert (v["reward"], v["passed"], v["failed"], v["errors"]) == (0.0, 2, 1, 1)
    assert answers["guards"]["subreaper"] is True


def test_answer_lines_need_the_nonce_and_the_first_answer_wins():
    lines = b"\n".join(json.dumps(m).encode() for m in [
        {"nonce": "n", "name": "a", "value": 1}, {"nonce": "x", "name": "b", "value": 2},  # another nonce
        {"nonce": "n", "name": "a", "value": 3}, {"nonce": "n", "name": "zz", "value": 4},  # repeat, not asked
        {"nonce": "n", "name": "c", "value": [5]}]) + b"\nnot json\n"
    assert vr.parse_answers(lines, "n", {"a", "b", "c"}) == ({"a": 1, "c": [5]}, False)
    done = lines + json.dumps({"nonce": "n", "done": True}).encode() + b"\n" + json.dumps(
        {"nonce": "n", "name": "b", "value": 6}).encode()
    assert vr.parse_answers(done, "n", {"a", "b", "c"}) == ({"a": 1, "c": [5]}, True)  # nothing after done


def test_a_hung_child_times_out_and_its_daemons_are_killed(tmp_path):
    pid_file = tmp_path / "daemon.pid"
    probes = ("import os, time\n"
              "def probe_daemon(ctx):\n"
              "    if os.fork() == 0:\n        os.setsid()\n"
              "        if os.fork() == 0:\n"
              f"            open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n            time.sleep(120)\n"
              "        os._exit(0)\n"
              "    time.sleep(0.2)\n    return 'forked'\n"
              "def probe_hang(ctx):\n    time.sleep(120)\n")
    start = time.monotonic()
    answers, v = run_runner(tmp_path, probes, {"daemon": {"value": "forked"}, "hang": {"value": None}},
                            check={"timeout_s": 2})
    assert time.monotonic() - start < 20
    run = answers["runs"]["main"]
    assert run["status"] == "timeout" and run["killed_descendants"] >= 1  # the setsid, double-forked daemon
    assert not os.path.exists(f"/proc/{int(pid_file.read_text())}")
    assert v["passed"] == 1 and v["errors"] == 1 and v["reward"] == 0.0


def test_the_workspace_cannot_shadow_the_standard_library_and_hidden_files_are_scrubbed(tmp_path):
    workspace = {"colorsys.py": "raise SystemExit('shadowed')\n", "mylib.py": "VALUE = 5\n", "pkg/__init__.py": "",
                 "pkg/sub.py": "from mylib import VALUE\nDOUBLE = 2 * VALUE\n"}
    probes = ("import os, sys\n"
              "def probe_stdlib(ctx):\n    import colorsys\n    return colorsys.__file__.startswith(ctx.workspace)\n"
              "def probe_workspace(ctx):\n    return ctx.load('pkg.sub').DOUBLE\n"
              "def probe_path(ctx):\n    return [p for p in sys.path if p.startswith(ctx.workspace)]\n"
              "def probe_cwd(ctx):\n    return os.listdir(os.getcwd())\n"
              f"def probe_tests(ctx):\n    return sorted(os.listdir({str(tmp_path / 'tests')!r}))\n")
    answers, v = run_runner(tmp_path, probes, {"stdlib": {"value": False}, "workspace": {"value": 10},
                                               "path": {"value": []}, "cwd": {"value": []}, "tests": {"value": []}},
                            workspace=workspace, scrub=True)
    assert v["reward"] == 1.0, answers
    assert answers["guards"]["scrubbed"] is True and not os.listdir(tmp_path / "tests")


def test_runner_copies_are_current_and_every_project_task_uses_it():
    from composer2_jax.bench.task import load_suite

    for task in load_suite("v0").tasks:  # loading installs the runner (bench/shared_files.py; no copy is committed)
        assert (task.tests_dir / verdict.RUNNER_NAME).read_bytes() == verdict.RUNNER.read_bytes(), task.name
        assert verdict.load_expected(task.tests_dir) is not None, task.name
        assert not list(task.tests_dir.glob("test_*_hidden.py")) and not (task.tests_dir / "mutation_grade.py").exists()
        assert (task.tests_dir / "test.sh").read_text() == verdict.TEST_SH


def test_every_task_has_a_value_that_cannot_be_guessed():
    """A child answering True (or any constant) everywhere must fail: some expected value is not a constant."""
    from composer2_jax.bench.task import load_suite
    from composer2_jax.rl import tasks as rl_tasks

    constants = [True, False, None, 0, 1, "", [], {"dict": []}]
    every = [(t.name, verdict.load_expected(t.tests_dir)) for t in load_suite("v0").tasks]
    every += [(t.task_id, rl_tasks.expected_values(t)) for t in (rl_tasks.make_task(s, lv) for s in range(4)
                                                                 for lv in range(4))]
    for name, expected in every:
        for c in constants:
            assert vr.judge({n: c for n in expected["probes"]}, expected)["reward"] == 0.0, (name, c)


# ------------------------------------------------------------------------------------------------ forging, in sandboxes

FAST_V0 = ("bug-config-equals", "tests-slugify", "gen1-fnmatch-filter", "logs-utf8-split", "config-entrypoint-path",
           "refactor-rename-function", "feature-kv-ttl")  # one per category, rotated over the policies
HANG_S = 3.0  # verifier timeout the hang policy gets in the fast suite


@pytest.fixture(scope="module")
def env():
    from composer2_jax.env import Environment, SandboxLimits

    e = Environment(pool_size=2, limits=SandboxLimits(timeout_s=120))
    yield e
    e.shutdown()


def fast_jobs() -> list[tuple[str, str, str]]:
    """(kind, task, policy): every policy on the RL toy (RL grader) and on one v0 task (rotating categories)."""
    jobs = []
    for i, policy in enumerate(forging.POLICIES):
        jobs += [("rl", "calc-7-L3", policy), ("v0", FAST_V0[i % len(FAST_V0)], policy)]
    return jobs


def grade_job(env, kind: str, name: str, policy: str, work: Path, hang_s: float) -> dict:
    """Grade one (kind, task, policy) with benchmarks/tasks/forgery_grid.py's graders."""
    from benchmarks.tasks import forgery_grid as bench_forging
    from composer2_jax.bench.task import load_suite
    from composer2_jax.rl import tasks as rl_tasks

    work.mkdir(parents=True, exist_ok=True)
    if kind in ("rl", "rl-harbor"):
        seed, level = name.split("-")[1], name.split("-L")[1]
        task = rl_tasks.make_task(int(seed), int(level))
        if kind == "rl":
            return bench_forging.grade_rl(env, task, policy, work, hang_s)
        path = rl_tasks.write_task_folder(task, work / "rl-suite")
        return bench_forging.grade_bench(env, bench_forging.load_task_folder(path), policy, work, hang_s)
    task = next(t for t in load_suite("v0").tasks if t.name == name)
    return bench_forging.grade_bench(env, task, policy, work, hang_s)


@needs_sandbox
@pytest.mark.parametrize("kind,name,policy", fast_jobs())
def test_forging_policy_scores_zero(env, tmp_path, kind, name, policy):
    g = grade_job(env, kind, name, policy, tmp_path, HANG_S)
    assert g["reward"] == 0.0 and not g["passed"], g


@needs_sandbox
def test_forgeries_act_in_a_sandbox_and_nowhere_else(env, tmp_path):
    """The planted code recognises a sandbox by its pid 1, the guest (bwrap.GUEST_DIR/main.py): both checks (the
    payload prelude and the site hook's .pth line) hold in a sandbox and fail on this host, so moving the guest without
    the forgeries would turn every policy into a silent no-op here rather than a zero that proves nothing."""
    forging.forge(tmp_path, "site_hooks")
    pth = ".local/lib/python3.11/site-packages/zz_forge.pth"
    probe = forging._PRELUDE + "print(_zz_in_sandbox(), _zz_first)\n"
    (tmp_path / "probe.py").write_text(probe)
    run_pth = f"python3 -c \"exec(open('{pth}').read()); print('survived')\""
    host = [subprocess.run(cmd, shell=True, cwd=tmp_path, capture_output=True, text=True)
            for cmd in ("python3 probe.py", run_pth)]
    assert [h.stdout for h in host] == ["False False\n", "survived\n"], host
    sid = env.create(tmp_path)
    got = [env.exec(sid, cmd, timeout_s=60) for cmd in ("python3 probe.py", run_pth)]
    assert [(r["exit_code"], r["stdout"]) for r in got] == [(0, "True True\n"), (0, "")], got
    env.close(sid)


@needs_sandbox
@pytest.mark.parametrize("kind,name", [("rl", "calc-7-L3"), ("rl-harbor", "calc-7-L0")])
def test_oracle_still_scores_one(env, tmp_path, kind, name):
    g = grade_job(env, kind, name, "oracle", tmp_path, HANG_S)
    assert g["reward"] == 1.0 and g["passed"], g


@needs_sandbox
def test_a_child_cannot_read_the_runner_parent_in_the_sandbox(env, tmp_path):
    """Non-dumpable: the sandbox user (no capabilities) cannot read the parent's environment, memory or fds."""
    from composer2_jax.bench.grade import grade
    from composer2_jax.bench.task import load_task

    probes = ("import os\n"
              "def probe_parent(ctx):\n    out = []\n"
              "    for what in ('environ', 'mem', 'fd'):\n"
              "        try:\n            p = f'/proc/{os.getppid()}/{what}'\n"
              "            out.append(len(os.listdir(p)) if what == 'fd' else len(open(p, 'rb').read(1)))\n"
              "        except OSError as e:\n            out.append(type(e).__name__)\n    return out\n")
    root = tmp_path / "t"
    envtest.make_repo(str(root), {"instruction.md": "x\n", "environment/repo/README": "x\n",
                                  "tests/test.sh": verdict.TEST_SH, "tests/probes.py": probes,
                                  "tests/check.json": json.dumps({"version": 1}),
                                  "tests/expected.json": json.dumps({"probes": {"parent": {"value": [
                                      "PermissionError", "PermissionError", "PermissionError"]}}})})
    shutil.copyfile(verdict.RUNNER, root / "tests" / verdict.RUNNER_NAME)
    task = load_task(root)
    g = grade(env, env.import_repo(task.repo_dir()), task)
    assert g.passed and g.reward == 1.0, g.output


THIRD_PARTY_SH = """#!/usr/bin/env bash
mkdir -p "$LOGS_DIR/verifier"
cp "$TESTS_DIR/test_app.py" /tmp/test_app.py
if python3 -m unittest discover -s /tmp -p 'test_app.py'; then echo 1 > "$LOGS_DIR/verifier/reward.txt"; \
else echo 0 > "$LOGS_DIR/verifier/reward.txt"; fi
"""


@needs_sandbox
@pytest.mark.parametrize("policy", ["shadow_modules", "site_hooks"])
def test_third_party_verifier_guard_keeps_runner_modules_out_of_the_workspace(env, tmp_path, policy):
    """A Harbor test.sh we do not control (unittest from the repository root): the oracle passes, and a workspace
    that shadows unittest/json/sitecustomize does not, because the guard resolves them from the interpreter."""
    from composer2_jax.bench.grade import grade
    from composer2_jax.bench.task import load_task

    root = tmp_path / "third"
    envtest.make_repo(str(root), {
        "instruction.md": "Make app.answer() return 42.\n", "environment/repo/app.py": "def answer():\n    return 41\n",
        "tests/test.sh": THIRD_PARTY_SH, "solution/solve.sh": "sed -i 's/41/42/' app.py\n",
        "tests/test_app.py": "import unittest\nimport app\n\n\nclass T(unittest.TestCase):\n"
                             "    def test_answer(self):\n        self.assertEqual(app.answer(), 42)\n"})
    task = load_task(root)
    solved = tmp_path / "solved"
    shutil.copytree(task.repo_dir(), solved)
    (solved / "app.py").write_text("def answer():\n    return 42\n")
    assert grade(env, env.import_repo(solved), task).passed
    forged = forging.forged_copy(task.repo_dir(), policy, tmp_path / "forged")
    g = grade(env, env.import_repo(forged), task)
    assert g.reward == 0.0 and not g.passed, g.output


@pytest.mark.slow
@needs_sandbox
def test_every_forging_policy_scores_zero_on_every_task(env, tmp_path):
    """The full cross product: every policy on every v0 task and on the RL toy (both graders, every level)."""
    from concurrent.futures import ThreadPoolExecutor

    from composer2_jax.bench.task import load_suite

    jobs = [(kind, name, policy) for policy in forging.POLICIES
            for kind, name in [("rl", f"calc-7-L{lv}") for lv in range(4)] +
            [("rl-harbor", f"calc-7-L{lv}") for lv in range(4)] + [("v0", t.name) for t in load_suite("v0").tasks]]
    with ThreadPoolExecutor(4) as pool:
        grades = list(pool.map(lambda j: (j, grade_job(env, *j, tmp_path / "-".join(j), HANG_S)), jobs))
    forged = [(j, g) for j, g in grades if g["passed"] or g["reward"] != 0.0]
    assert not forged, forged
