"""Rewards: task success, effort, the concave length penalty, each auxiliary reward, and their combination."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from composer2_jax.episode import SegmentBuilder
from composer2_jax.rl import rewards as rw
from tests.tolerances import FP32_FN


def close(actual, expected, tol=FP32_FN):
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64), **tol)


# ----------------------------------------------------------------------------------------------------- success


@pytest.mark.parametrize(
    "counts, binary, fraction",
    [
        ((5, 0, 0), 1.0, 1.0),
        ((5, 1, 0), 0.0, 5 / 6),
        ((3, 0, 1), 0.0, 0.75),  # an erroring test is not a pass
        ((0, 0, 0), 0.0, 0.0),  # nothing ran: no success
    ],
)
def test_task_success(counts, binary, fraction):
    result = rw.TestResult(*counts)
    assert rw.task_success(result, "binary") == binary
    close(rw.task_success(result, "fraction"), fraction)
    as_dict = dict(zip(("passed", "failed", "errors"), counts))
    assert rw.task_success(as_dict, "binary") == binary


def test_task_success_errors():
    with pytest.raises(ValueError, match="unknown success mode 'partial'"):
        rw.task_success(rw.TestResult(1, 0), "partial")
    with pytest.raises(ValueError, match=r"lacks \['failed'\]"):
        rw.task_success({"passed": 1})
    with pytest.raises(ValueError, match="TestResult.failed must be a non-negative int"):
        rw.TestResult(1, -1)


# ------------------------------------------------------------------------------------------ effort and penalty


def test_effort_by_hand():
    # 1·1000 + 1·200 + 0.1·3000 + 1·100 + 50·4 + 20·5 = 1000 + 200 + 300 + 100 + 200 + 100 = 1900
    counts = rw.EffortCounts(1000, 200, 3000, 100, tool_calls=4, turns=5)
    assert rw.effort(counts) == pytest.approx(1900.0)
    w = rw.EffortWeights(thinking_tokens=2.0, tool_output_tokens=0.0, tool_calls=0.0, turns=1.0)
    # 2·1000 + 200 + 0 + 100 + 0 + 5 = 2305
    assert rw.effort(counts, w) == pytest.approx(2305.0)
    with pytest.raises(ValueError, match="EffortCounts.turns must be ≥ 0"):
        rw.effort(rw.EffortCounts(turns=-1))


@pytest.mark.parametrize(
    "k, q, x, expected",
    [
        (0.5, 0.0, 3.0, 3.0),  # q = 0 is linear: ((1 + 1.5)^1 − 1)/(0.5·1) = 1.5/0.5 = 3 = x
        (1.0, 0.5, 3.0, 2.0),  # (4^0.5 − 1)/(1·0.5) = 1/0.5 = 2
        (1.0, 2.0, 1.0, 0.5),  # (2^−1 − 1)/(1·(−1)) = −0.5/−1 = 0.5
        (1.0, 1.0, math.e - 1.0, 1.0),  # ln(1 + e − 1)/1 = 1
        (1e-3, 1.0, 1900.0, 1064.7107),  # ln(2.9)/1e-3
    ],
)
def test_length_penalty_by_hand(k, q, x, expected):
    close(rw.length_penalty(x, k, q), expected)


KQ = [(1e-3, 0.0), (1e-3, 0.5), (1e-3, 1.0), (1e-2, 1.5), (1e-4, 2.0)]


@pytest.mark.parametrize("k, q", KQ)
def test_length_penalty_zero_monotone_concave(k, q):
    x = jnp.linspace(0.0, 2e4, 101)
    c = rw.length_penalty(x, k, q)
    assert float(c[0]) == 0.0
    assert bool(jnp.all(jnp.diff(c) > 0))
    slope = jax.vmap(jax.grad(lambda v: rw.length_penalty(v, k, q)))(x)
    if q > 0:
        assert bool(jnp.all(jnp.diff(slope) < 0))  # C′ strictly decreasing: concave
    else:
        close(slope, jnp.ones_like(x))  # q = 0: linear


@pytest.mark.parametrize("k, q", KQ)
def test_length_penalty_derivative_by_grad(k, q):
    # C′(x) = (1 + kx)^(−q), checked against jax.grad (q = 1 goes through the log branch).
    x = jnp.array([0.0, 10.0, 500.0, 3e3, 5e4])
    grad = jax.vmap(jax.grad(lambda v: rw.length_penalty(v, k, q)))(x)
    close(grad, (1.0 + k * x) ** (-q))


@pytest.mark.parametrize("q", [1.0 - 1e-6, 1.0 + 1e-6])
def test_length_penalty_continuous_at_q_one(q):
    k = 1e-3
    x = jnp.array([0.0, 1.0, 100.0, 1e4, 1e5])
    log_form = jnp.log1p(k * x) / k
    close(rw.length_penalty(x, k, q), log_form)
    close(rw.length_penalty(x, k, 1.0), log_form)
    grad = jax.vmap(jax.grad(lambda v: rw.length_penalty(v, k, q)))(x)
    close(grad, 1.0 / (1.0 + k * x))


# --------------------------------------------------------------------------------------------------- lint delta

BEFORE = {
    "pkg/a.py": "import os\n\nx = 1\n",  # F401 (os): 1 finding
    "pkg/fixed.py": "import os\nimport sys\n",  # F401 ×2: 2 findings
    "pkg/gone.py": "import os\n",  # deleted below
    "README.md": "# notes\n",  # not Python: ignored
}
AFTER = {
    "pkg/a.py": "import os\nimport sys\n\nx = 1   \n",  # F401 ×2 + W291 trailing space: 3 → +2
    "pkg/fixed.py": "",  # 0 findings: −2, clamped to 0 (fixing old lint earns nothing)
    "pkg/gone.py": None,  # deleted: 0 − 1, clamped to 0
    "pkg/new.py": "import json\n\n\ndef f(y):\n    if y == None:\n        return json\n    l = 1\n    return 2\n",
    # new file: E711 (== None), E741 (ambiguous `l`), F841 (unused `l`): +3
    "venv/gen.py": "import os\n",  # F401: +1 (a folder ruff skips by default when walking a tree)
    "README.md": "# notes\nTODO\n",
}


def test_lint_findings_added_on_crafted_files():
    # +2 (a.py) + 0 (fixed.py) + 0 (gone.py) + 3 (new.py) + 1 (venv/gen.py) = 6
    assert rw.lint_findings_added(BEFORE, AFTER) == 6
    assert rw.lint_findings_added(AFTER, AFTER) == 0
    assert rw.lint_findings_added({"README.md": "x"}, {"README.md": "y"}) == 0  # no Python file: no ruff run


def test_lint_needs_ruff(monkeypatch):
    monkeypatch.setattr(rw, "ruff_available", lambda: False)
    with pytest.raises(RuntimeError, match="readability reward needs ruff"):
        rw.lint_findings_added(BEFORE, AFTER)


def test_lint_rejects_paths_outside_the_repo():
    with pytest.raises(ValueError, match="must be relative"):
        rw.lint_findings_added({}, {"../evil.py": "x = 1\n"})


# ------------------------------------------------------------------------------------------------------- todos


def test_unfinished_todos():
    todos = [
        {"content": "reproduce the bug", "status": "done"},  # the env's todo_write spelling
        {"content": "read the logs", "status": "completed"},
        {"content": "write the fix", "status": "in_progress"},
        {"content": "add a test", "status": "pending"},
        {"content": "refactor module", "status": "cancelled"},  # explicitly dropped: resolved
    ]
    assert rw.unfinished_todos(todos) == 2
    assert rw.unfinished_todos([]) == 0
    with pytest.raises(ValueError, match="todo item 0 has status 'finished'"):
        rw.unfinished_todos([{"content": "x", "status": "finished"}])
    with pytest.raises(ValueError, match="todo item 1 is"):
        rw.unfinished_todos([todos[0], {"content": "no status"}])


DIFF = """\
diff --git a/app.py b/app.py
index 1111111..2222222 100644
--- a/app.py
+++ b/app.py
@@ -1,4 +1,7 @@
 import os
-# TODO: remove this hack
+    # TODO: remove this hack
+# FIXME handle errors
 x = 1
+print("TODO is a string, not a comment")
+y = 2  # todo in lower case is not a marker
 z = 3
diff --git a/lib.c b/lib.c
--- a/lib.c
+++ b/lib.c
@@ -10,2 +10,3 @@ int f(void) {
 int n = 0;
+++n; // TODO overflow
 return n;
diff --git a/docs/index.md b/docs/index.md
new file mode 100644
--- /dev/null
+++ b/docs/index.md
@@ -0,0 +1,2 @@
+<!-- TODO: write the docs -->
+- item
\\ No newline at end of file
"""


def test_diff_changed_lines():
    added, removed = rw.diff_changed_lines(DIFF)
    assert removed == ["# TODO: remove this hack"]
    assert added == [
        "    # TODO: remove this hack",
        "# FIXME handle errors",
        'print("TODO is a string, not a comment")',
        "y = 2  # todo in lower case is not a marker",
        "++n; // TODO overflow",  # starts with '+++' in the diff: content, not a file header
        "<!-- TODO: write the docs -->",
        "- item",
    ]


def test_added_todo_comments():
    # moved TODO (re-indented): 0; FIXME: 1; string: 0; lower case: 0; C "// TODO": 1; HTML "<!-- TODO": 1 → 3
    assert rw.added_todo_comments(DIFF) == 3
    assert rw.added_todo_comments("") == 0


# ------------------------------------------------------------------------------------------------- tool calls


def test_count_invalid_tool_calls():
    calls = [
        {"name": "bash", "arguments": {"cmd": "ls"}},  # valid
        {"name": "bash", "arguments": '{"cmd": "ls"}'},  # valid: JSON-object string
        {"name": "bash", "arguments": "{not json"},  # invalid JSON
        {"name": "bash", "arguments": "[1, 2]"},  # JSON, but not an object
        {"arguments": {}},  # no name
        {"name": "rm_rf", "arguments": {}},  # unknown tool (only when tool names are given)
        "garbage",  # not a call at all
    ]
    assert rw.count_invalid_tool_calls(calls, tool_names=["bash", "edit"]) == 5
    assert rw.count_invalid_tool_calls(calls) == 4
    assert rw.count_invalid_tool_calls([]) == 0


def test_count_malformed_errors_from_the_harness():
    # error kinds as composer2_jax.env reports them: format errors count, failures of well-formed calls do not
    kinds = [None, "bad_json", "not_found", "unknown_tool", "timeout", "invalid_arguments", None]
    assert rw.count_malformed_errors(kinds) == 3
    outcome = rw.EpisodeOutcome(tests=rw.TestResult(1, 0), tool_call_errors=kinds)
    br = rw.compute_reward(outcome)
    assert br.n_invalid_tool_calls == 3
    close(br.invalid_tool_calls, -0.05 * 3)
    with pytest.raises(ValueError, match="give tool_calls or tool_call_errors, not both"):
        rw.compute_reward(rw.EpisodeOutcome(tests=rw.TestResult(1, 0), tool_calls=[{}], tool_call_errors=[None]))


# ---------------------------------------------------------------------------------------------------- clarity


def test_repetition_ratio_by_hand():
    # 12 words → 9 four-grams; unique: "a b c d", "b c d a", "c d a b", "d a b c" → 1 − 4/9 = 5/9
    close(rw.repetition_ratio("a b c d a b c d a b c d"), 5 / 9)
    assert rw.repetition_ratio("the quick brown fox jumps over the lazy dog") == 0.0
    assert rw.repetition_ratio("too short") == 0.0
    close(rw.repetition_ratio("x " * 100), 1 - 1 / 97)  # a loop → ratio near 1
    with pytest.raises(ValueError, match="n-gram size must be ≥ 1"):
        rw.repetition_ratio("a b", n=0)


def test_excess_thinking_and_clarity_penalty_by_hand():
    thinking = " ".join(f"w{i}" for i in range(30))  # 30 distinct words
    # 30 thinking words vs a 1-word answer: ratio 30 > 20 → excess 1 − 20/30 = 1/3; repetition 0
    close(rw.excess_thinking(thinking, "done"), 1 / 3)
    close(rw.clarity_penalty(thinking, "done"), 0.5 * (0 + 1 / 3))
    # 30 vs 2 words: ratio 15 ≤ 20 → 0
    assert rw.excess_thinking(thinking, "all done") == 0.0
    # empty thinking: nothing to judge
    assert rw.clarity_penalty("", "") == 0.0


# ----------------------------------------------------------------------------------------------- combination


def test_compute_reward_breakdown_by_hand():
    outcome = rw.EpisodeOutcome(
        tests={"passed": 5, "failed": 0, "errors": 0},
        effort=rw.EffortCounts(1000, 200, 3000, 100, tool_calls=4, turns=5),  # x = 1900
        todos=[{"content": "a", "status": "completed"}, {"content": "b", "status": "pending"}],
        diff=DIFF,
        files_before={"pkg/a.py": BEFORE["pkg/a.py"]},
        files_after={"pkg/a.py": AFTER["pkg/a.py"]},
        tool_calls=[{"name": "bash", "arguments": {}}, {"name": "bash", "arguments": "{"}],
        thinking="a b c d a b c d a b c d",
        final_message="done",
    )
    br = rw.compute_reward(outcome, rw.RewardConfig())
    # success 1; penalty −1e-4·ln(2.9)/1e-3 = −0.10647107; lint +2 → −0.04; todos 1 + 3 → −0.08;
    # invalid calls 1 → −0.05; clarity ½·(5/9 + 0) = 5/18 → −0.05·5/18 = −0.01388889
    assert br.success == 1.0
    close(br.effort, 1900.0)
    close(br.length_penalty, -0.10647107)
    assert (br.lint_findings, br.unfinished_todos, br.n_todo_comments, br.n_invalid_tool_calls) == (2, 1, 3, 1)
    close(br.readability, -0.04)
    close(br.todos, -0.02)
    close(br.todo_comments, -0.06)
    assert br.denied_egress == 0.0 and br.n_denied_egress == 0
    close(br.invalid_tool_calls, -0.05)
    close(br.clarity, -0.05 * 5 / 18)
    close(br.total, 1 - 0.10647107 - 0.04 - 0.08 - 0.05 - 0.05 * 5 / 18)
    logged = br.as_dict()
    assert set(logged) >= {"reward/total"} | {f"reward/{t}" for t in rw.TERMS}
    close(logged["reward/total"], math.fsum(logged[f"reward/{t}"] for t in rw.TERMS))  # TERMS are the whole sum
    close(logged["reward/total"], br.total)


def test_penalty_gate_success_vs_all():
    quick = rw.EpisodeOutcome(tests=rw.TestResult(0, 3), effort=rw.EffortCounts(thinking_tokens=100))
    long = rw.EpisodeOutcome(tests=rw.TestResult(0, 3), effort=rw.EffortCounts(thinking_tokens=50_000))
    win = rw.EpisodeOutcome(tests=rw.TestResult(3, 0), effort=rw.EffortCounts(thinking_tokens=50_000))
    only_success = rw.RewardConfig(penalty_on="success")
    everyone = rw.RewardConfig(penalty_on="all")
    # "success": failures are not charged, so giving up early earns nothing over an honest long attempt
    assert rw.compute_reward(quick, only_success).total == rw.compute_reward(long, only_success).total == 0.0
    # "all": the quick failure out-scores the long one (the incentive to quit the gate avoids)
    assert rw.compute_reward(quick, everyone).total > rw.compute_reward(long, everyone).total
    # both charge successes the same: 1 − 1e-4·ln(51)/1e-3
    close(rw.compute_reward(win, only_success).total, 1 - 0.1 * math.log(51.0))
    close(rw.compute_reward(win, everyone).total, 1 - 0.1 * math.log(51.0))


def test_reward_config_errors():
    with pytest.raises(ValueError, match="unknown penalty_on 'failures'"):
        rw.RewardConfig(penalty_on="failures")
    with pytest.raises(ValueError, match="need k > 0"):
        rw.RewardConfig(penalty_k=0.0)


def test_effort_counts_from_episode():
    b = SegmentBuilder([1], [2, 3], summary_prompt_tokens=[9], context_budget=15)
    b.append([10] * 5, True, [-0.1] * 5, role="thinking", policy_version=0)
    b.append([11] * 3, True, [-0.1] * 3, role="tool_call", policy_version=0)
    b.append([12] * 6, False, role="tool_output")  # context now 1 + 2 + 5 + 3 + 6 = 17 ≥ 15
    assert b.needs_summary
    b.request_summary()
    b.add_summary([13] * 2, [-0.2] * 2, policy_version=1)
    b.append([10] * 2, True, [-0.1] * 2, role="thinking", policy_version=1)
    b.append([14] * 4, True, [-0.1] * 4, role="message", policy_version=1)
    counts = rw.effort_counts_from_episode(b.finish())
    # thinking 5 + 2 + summary 2 = 9; tool call 3 (1 call); tool output 6; message 4
    # turns: [thinking, tool_call] | [summary] | [thinking, message] (new segment) = 3
    assert counts == rw.EffortCounts(9, 3, 6, 4, tool_calls=1, turns=3)


def test_every_term_is_weighted_by_its_config_coefficient():
    outcome = rw.EpisodeOutcome(tests=rw.TestResult(3, 0), todos=[{"content": "a", "status": "pending"}],
                                diff=DIFF, tool_call_errors=["bad_json", None],
                                egress=[{"allowed": False}, {"allowed": True}, {"allowed": False}])
    cfg = rw.RewardConfig(success_coef=0.5, penalty_coef=0.0, todo_coef=0.1, todo_comment_coef=0.01,
                          invalid_tool_call_coef=0.2, denied_egress_coef=0.3)
    br = rw.compute_reward(outcome, cfg)
    assert (br.unfinished_todos, br.n_todo_comments, br.n_invalid_tool_calls, br.n_denied_egress) == (1, 3, 1, 2)
    close(br.success, 0.5)
    close(br.todos, -0.1)
    close(br.todo_comments, -0.03)
    close(br.invalid_tool_calls, -0.2)
    close(br.denied_egress, -0.6)
    signed = [f.name for f in rw.dataclasses.fields(rw.RewardBreakdown)][:len(rw.TERMS)]
    assert tuple(signed) == rw.TERMS  # the breakdown's signed fields are exactly the terms, in order
    with pytest.raises(ValueError, match="egress event 0"):
        rw.compute_reward(rw.EpisodeOutcome(tests=rw.TestResult(1, 0), egress=[{"host": "x"}]), cfg)
    with pytest.raises(ValueError, match="todo_comment_coef"):
        rw.RewardConfig(todo_comment_coef=-1.0)
