"""The multi-module generated family (rl/pkg_tasks.py): 6–8-turn oracle episodes, unforgeable grading, content split."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from composer2_jax.bench.policies import ScriptedPolicy, call
from composer2_jax.data import tokenizer as tk
from composer2_jax.env import Environment, SandboxLimits
from composer2_jax.env.harness import HarnessConfig
from composer2_jax.rl import orchestrator, pkg_tasks, sources
from composer2_jax.rl.grading import grade_episode
from composer2_jax.rl.rewards import RewardConfig
from composer2_jax.rl.run_config import RLExperimentConfig
from composer2_jax.rl.services.env_worker import EnvWorker
from composer2_jax.rl.services.oracle import OracleConfigError, write_oracle_transcripts
from tests.markers import needs_sandbox

TOK = tk.ByteTokenizer()
HARNESS = HarnessConfig(max_turns=10, max_new_tokens=192, max_total_tokens=2048, context_budget=1600,
                        max_summaries=0, summary_tokens=64, system_prompt="Fix the bug.",
                        summary_prompt="Summarize your progress.")
TOOLS = ("read_file", "edit_file", "run_terminal_cmd", "submit")


def test_family_knob_instruction_and_oracle_turns():
    for level in range(pkg_tasks.MAX_LEVEL + 1):
        for seed in range(20):
            t = pkg_tasks.make_task(seed, level)
            k = 2 + level % 2
            assert len(t.modules) == k + 1 and len(t.bugs) == k and t.source == "pkg"
            assert t.difficulty == ("easy" if level < 2 else "hard")
            if t.difficulty == "easy":
                assert {op for _, op in t.bugs} == {"-"}
            assert all(n not in t.instruction for n in pkg_tasks.NAMES)  # the instruction names no module
            assert set(t.files()) == {f"{n}.py" for n, _ in t.modules} | {"test.py"}
            replies = pkg_tasks.oracle_replies(t)
            assert 4 <= len(replies) == 2 * k + 2 <= 8
            assert pkg_tasks.make_task(seed, level) == t  # deterministic
    with pytest.raises(ValueError, match="level=4"):
        pkg_tasks.make_task(0, 4)


def test_split_is_disjoint_by_content_and_sets_are_distinct():
    train = pkg_tasks.task_set(800, 0)
    held = pkg_tasks.task_set(64, 1_000_000, split="heldout")
    assert not {t.modules for t in train} & {t.modules for t in held}
    assert len({t.modules for t in held}) == 64 and len({t.modules for t in train}) == 800
    assert all(pkg_tasks.split_of(t) == "heldout" for t in held)
    assert [t.level for t in held[:4]] == [0, 1, 2, 3]


def test_imperfect_teacher_writes_one_wrong_fix_at_its_rate():
    pool = pkg_tasks.task_set(400, 3)
    for rate in (0.0, 0.3, 1.0):
        ops = [pkg_tasks.teacher_ops(t, rate, seed=1) for t in pool]
        wrong = [sum(op != t.right_op for op in o) for o, t in zip(ops, pool)]
        assert set(wrong) <= {0, 1} and abs(np.mean(wrong) - rate) < 0.07
        assert all(op != wrong_op for o, t in zip(ops, pool) for op, (_, wrong_op) in zip(o, t.bugs))


def test_pkg_is_a_task_source_of_the_rl_config():
    assert [s.kind for s in sources.parse_mix("pkg")] == ["pkg"]
    with pytest.raises(ValueError, match="pkg takes no argument"):
        sources.parse_mix("pkg:x")
    run = RLExperimentConfig(tasks="pkg", harness=HARNESS)
    held = orchestrator.heldout_tasks(run)
    assert len(held) == run.rl.eval_tasks and all(isinstance(t, pkg_tasks.PkgTask) for t in held)
    train = orchestrator.source_tasks(run, sources.parse_mix("pkg")[0], "train").tasks
    assert not {t.modules for t in train} & {t.modules for t in held}
    assert sources.warm_start_family("pkg") == "pkg" and sources.warm_start_family("toy,suite:v0") == "toy"
    assert sources.family_module("pkg") is pkg_tasks
    assert sources.required_tools("toy@2,pkg") == ("run_terminal_cmd",) and sources.required_tools("toy") == ()


# ------------------------------------------------------------------------------------------------ sandboxes


@pytest.fixture(scope="module")
def env():
    e = Environment(pool_size=4, limits=SandboxLimits(timeout_s=30))
    yield e
    e.shutdown()


@pytest.fixture(scope="module")
def worker(env, tmp_path_factory):
    return EnvWorker(env, TOK, HARNESS, RewardConfig(penalty_coef=1e-3), TOOLS, schemas_in_prompt=False,
                     repo_root=tmp_path_factory.mktemp("repos"))


@needs_sandbox
def test_oracle_passes_in_2k_plus_2_turns_and_the_test_run_names_the_failing_modules(worker):
    for level in (0, 3):
        task = pkg_tasks.make_task(7, level)
        messages: list = []
        r = worker.run(task, ScriptedPolicy(TOK, pkg_tasks.oracle_replies(task), HARNESS), 0, transcript=messages)
        assert r.success == 1.0 and r.stop_reason == "submitted" and r.turns == 2 * len(task.bugs) + 2
        assert 4 <= r.turns <= 8 and r.malformed == 0
        first, last = messages[3]["content"], [m for m in messages if m["role"] == "tool"][-2]["content"]
        assert first.startswith("exit code 1") and [line.split()[1] for line in first.splitlines()
                                                     if line.startswith("FAIL ")] == [n for n, _ in task.bugs]
        assert last.startswith("exit code 0") and "OK" in last


@needs_sandbox
def test_null_agent_partial_fix_and_a_forged_test_file_fail(env, worker):
    task = pkg_tasks.make_task(9, 2)
    null = worker.run(task, ScriptedPolicy(TOK, [call("submit")], HARNESS), 0)
    assert null.success == 0.0
    partial = pkg_tasks.oracle_replies(task)[:3] + [call("submit")]  # tests, read and fix the first module only
    assert worker.run(task, ScriptedPolicy(TOK, partial, HARNESS), 0).success == 0.0
    sid = env.fork(worker.snapshot(task))
    env.call(sid, "write_file", {"path": "test.py", "content": "print('OK')\n"})
    obs = env.call(sid, "run_terminal_cmd", {"command": pkg_tasks.TEST_COMMAND})
    assert obs.content.startswith("exit code 0")  # the visible test now "passes" …
    g = grade_episode(env, sid, task)
    assert g.reward == 0.0 and g.tests.failed == 5 * len(task.bugs)  # … the hidden check does not
    for name, _ in task.bugs:
        env.call(sid, "write_file", {"path": f"{name}.py", "content": pkg_tasks.module_text("+")})
    assert grade_episode(env, sid, task).reward == 1.0
    env.close(sid)


@needs_sandbox
def test_teacher_transcripts_are_kept_unverified_with_their_turns(worker, tmp_path):
    path = tmp_path / "oracle.jsonl"
    pool = pkg_tasks.task_set(8, 5)
    out = write_oracle_transcripts(worker, pool, path, threads=4, error_rate=0.5)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    errors = [r for r in records if r["teacher_error"]]
    assert out["written"] == 8 and out["failed"] == 0 and 0 < len(errors) < 8
    assert all(r["success"] == 0.0 for r in errors) and all(r["success"] == 1.0 for r in records if r not in errors)
    assert all(r["turns"] in (6, 8) for r in records)
    assert all(r["messages"][-1]["role"] == "assistant" for r in records)


def test_a_retesting_teacher_errs_on_its_last_fix_only():
    pool = pkg_tasks.task_set(200, 3)
    ops = [pkg_tasks.teacher_ops(t, 1.0, seed=1, retest=True) for t in pool]
    assert all(o[:-1] == (t.right_op,) * (len(o) - 1) and o[-1] != t.right_op for o, t in zip(ops, pool))
    plain = [pkg_tasks.teacher_ops(t, 1.0, seed=1) for t in pool]
    assert any(o[-1] == t.right_op for o, t in zip(plain, pool))  # the plain teacher errs anywhere


def _fail_lines(text: str) -> list[str]:
    return [line.split()[1] for line in text.splitlines() if line.startswith("FAIL ")]


@needs_sandbox
def test_a_retesting_teacher_reads_the_first_fail_line_just_printed(env, worker, tmp_path):
    """teacher_retest: each fix's turn re-runs the tests, so every read_file names the first FAIL line of the newest
    observation that has any (the copy a small model learns first); 2k + 1 turns; teacher errors stay last. Its fix
    turns (edit, test run, and submit last: up to 274 byte tokens) do not fit 192: a clear error, nothing written."""
    path = tmp_path / "retest.jsonl"
    pool = pkg_tasks.task_set(8, 5)
    with pytest.raises(OracleConfigError, match=r"is 2\d\d tokens, over harness.max_new_tokens=192 \(ByteTokenizer\)"):
        write_oracle_transcripts(worker, pool, path, threads=4, retest=True)
    assert not path.exists()
    wide = EnvWorker(env, TOK, dataclasses.replace(HARNESS, max_new_tokens=384), RewardConfig(penalty_coef=1e-3),
                     TOOLS, schemas_in_prompt=False, repo_root=tmp_path / "repos")
    out = write_oracle_transcripts(wide, pool, path, threads=4, error_rate=0.5, retest=True)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert out["written"] == 8 and out["failed"] == 0 and 0 < sum(r["teacher_error"] for r in records) < 8
    for r, task in zip(sorted(records, key=lambda r: r["task_id"]), sorted(pool, key=lambda t: t.task_id)):
        k = len(task.bugs)
        assert r["turns"] == 2 * k + 1 and r["success"] == (0.0 if r["teacher_error"] else 1.0)
        reads, latest_fails = [], None
        for m in r["messages"]:
            if m["role"] == "tool" and _fail_lines(m["content"]):
                latest_fails = _fail_lines(m["content"])
            for c in m.get("tool_calls") or ():
                if c["name"] == "read_file":
                    path_arg = c["arguments"]["path"]
                    assert latest_fails and path_arg == f"{latest_fails[0]}.py", (r["task_id"], path_arg, latest_fails)
                    reads.append(path_arg)
        assert reads == [f"{n}.py" for n, _ in task.bugs]
        runs = [c for m in r["messages"] for c in m.get("tool_calls") or () if c["name"] == "run_terminal_cmd"]
        assert len(runs) == k + 1  # one run first and one after each fix (the last one's output is not kept)


def test_retest_is_refused_for_a_family_without_tests(worker, tmp_path):
    from composer2_jax.rl import tasks

    with pytest.raises(ValueError, match="only the pkg family's oracle runs tests"):
        write_oracle_transcripts(worker, tasks.task_set(2, 0), tmp_path / "x.jsonl", retest=True)
