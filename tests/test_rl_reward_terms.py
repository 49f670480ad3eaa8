"""Every reward term reaches the trainer: crafted episodes through the real EnvWorker path (real sandbox, harness,
grading, workspace changes from the sandbox's layers, todo_write state, egress proxy log) each move the reward in
the documented direction by the documented amount (rl/rewards.py: the term's weight times its measurement), and
the per-version logging reports each term's mean and fraction non-zero."""

import math

import pytest

from composer2_jax.bench.policies import ScriptedPolicy, call
from composer2_jax.data import tokenizer as tk
from composer2_jax.env import Environment, SandboxLimits
from composer2_jax.env import testing as envtest
from composer2_jax.env.harness import HarnessConfig
from composer2_jax.rl import tasks
from composer2_jax.rl.orchestrator import progress_line
from composer2_jax.rl.records import GroupRecord, summarize_groups
from composer2_jax.rl.rewards import TERMS, RewardConfig, ruff_available
from composer2_jax.rl.services.env_worker import EnvWorker
from tests.tolerances import FP32_FN

pytestmark = pytest.mark.skipif(envtest.host_problem() is not None, reason=f"no sandboxes: {envtest.host_problem()}")

TOK = tk.ByteTokenizer()
HARNESS = HarnessConfig(max_turns=4, max_new_tokens=1024, max_total_tokens=8192, context_budget=4096,
                        summary_tokens=64, max_observation_chars=400, system_prompt="Fix the bug.",
                        summary_prompt="Summarize your progress.")
TOOLS = ("read_file", "edit_file", "write_file", "run_terminal_cmd", "todo_write", "submit")
# Distinct weights, so that a term moving by another's weight would show; no effort penalty and no lint (which needs
# ruff) unless a test asks.
LINT_COEF = 0.03
COEFS = dict(success_coef=1.0, penalty_coef=0.0, lint_coef=0.0, todo_coef=0.05, todo_comment_coef=0.07,
             invalid_tool_call_coef=0.11, clarity_coef=0.13, denied_egress_coef=0.17)
TASK = tasks.make_task(11, 0)


def close(a, b):
    assert math.isclose(a, b, rel_tol=FP32_FN["rtol"], abs_tol=FP32_FN["atol"]), (a, b)


@pytest.fixture(scope="module")
def env():
    e = Environment(pool_size=2, limits=SandboxLimits(timeout_s=20))
    yield e
    e.shutdown()


def worker(env, tmp_path, **overrides):
    return EnvWorker(env, TOK, HARNESS, RewardConfig(**{**COEFS, **overrides}), TOOLS, schemas_in_prompt=False,
                     repo_root=tmp_path)


def fix(note: str = "a - b -> a + b.", **submit) -> str:
    """The oracle's one-reply fix (edit + submit) after a note."""
    edit = call("edit_file", path=tasks.FILE, old_string="return a - b", new_string="return a + b")
    return note + edit + call("submit", **submit)


def run(w, *replies):
    return w.run(TASK, ScriptedPolicy(TOK, list(replies), HARNESS), admitted_version=0)


def test_baseline_scores_exactly_its_success(env, tmp_path):
    rec = run(worker(env, tmp_path), fix())
    assert rec.success == 1.0 and rec.reward == 1.0
    assert all(rec.breakdown[f"reward/{t}"] == 0.0 for t in TERMS if t != "success")


@pytest.mark.skipif(not ruff_available(), reason="the lint term needs ruff")
def test_lint_findings_added_cost_lint_coef_each(env, tmp_path):
    lint = call("write_file", path="extra.py", content="import os\nimport sys\n")  # F401 twice
    rec = run(worker(env, tmp_path, lint_coef=LINT_COEF), lint + fix())
    assert rec.breakdown["reward/lint_findings"] == 2
    close(rec.reward, 1.0 - 2 * LINT_COEF)
    assert run(worker(env, tmp_path, lint_coef=LINT_COEF), fix()).breakdown["reward/lint_findings"] == 0


def test_unfinished_todo_items_cost_todo_coef_each(env, tmp_path):
    plan = call("todo_write", todos=[{"id": "1", "content": "fix", "status": "done"},
                                     {"id": "2", "content": "test", "status": "pending"},
                                     {"id": "3", "content": "docs", "status": "in_progress"}])
    rec = run(worker(env, tmp_path), plan + fix())
    assert rec.breakdown["reward/unfinished_todos"] == 2
    close(rec.reward, 1.0 - 2 * COEFS["todo_coef"])
    done = call("todo_write", todos=[{"id": "2", "content": "test", "status": "done"},
                                     {"id": "3", "content": "docs", "status": "done"}], merge=True)
    close(run(worker(env, tmp_path), plan, done + fix()).reward, 1.0)  # the final plan counts, not the history


def test_added_todo_comments_cost_todo_comment_coef_each(env, tmp_path):
    edit = call("edit_file", path=tasks.FILE, old_string="return a - b", new_string="return a + b  # TODO: check")
    rec = run(worker(env, tmp_path), "Fixing." + edit + call("submit"))
    assert rec.breakdown["reward/n_todo_comments"] == 1
    close(rec.reward, 1.0 - COEFS["todo_comment_coef"])


def test_malformed_calls_cost_invalid_tool_call_coef_each(env, tmp_path):
    broken = f"{tk.TOOL_CALL_BEGIN}{{not json{tk.TOOL_CALL_END}" + call("no_such_tool")
    rec = run(worker(env, tmp_path), broken + fix())
    assert rec.malformed == 2 and rec.breakdown["reward/n_invalid_tool_calls"] == 2
    close(rec.reward, 1.0 - 2 * COEFS["invalid_tool_call_coef"])


def test_unclear_thinking_costs_clarity_coef_times_its_penalty(env, tmp_path):
    # 40 words of 4-word loops: 37 4-grams, 4 distinct → repetition 33/37; answer "Fixed it." (2 words): 40/2 = 20
    # thinking words per answer word, not above max_think_ratio → no excess; penalty ½·(33/37 + 0)
    rec = run(worker(env, tmp_path), fix("one two three four " * 10, summary="Fixed it."))
    close(rec.breakdown["reward/clarity_penalty"], 0.5 * 33 / 37)
    close(rec.reward, 1.0 - COEFS["clarity_coef"] * 0.5 * 33 / 37)


def test_denied_egress_costs_denied_egress_coef_per_request(env, tmp_path):
    fetch = "python3 -c \"import urllib.request as u; u.urlopen('http://example.com/x', timeout=5)\" || true"
    curl = call("run_terminal_cmd", command=fetch)
    rec = run(worker(env, tmp_path), curl + curl + fix())
    assert rec.breakdown["reward/n_denied_egress"] == 2
    close(rec.reward, 1.0 - 2 * COEFS["denied_egress_coef"])


def test_failure_loses_success_coef_and_effort_costs_the_concave_penalty(env, tmp_path):
    wrong = call("edit_file", path=tasks.FILE, old_string="return a - b", new_string="return a * b")
    assert run(worker(env, tmp_path, success_coef=0.8), "Fixing." + wrong + call("submit")).reward == 0.0
    close(run(worker(env, tmp_path, success_coef=0.8), fix()).reward, 0.8)
    lam, k = 1e-3, 1e-3
    w = worker(env, tmp_path, penalty_coef=lam, penalty_k=k, penalty_q=1.0)
    quick, slow = run(w, fix()), run(w, tasks.read_call(), fix())
    assert slow.effort > quick.effort > 0
    for rec in (quick, slow):  # R = 1 − λ·ln(1 + k·x)/k at q = 1
        close(rec.reward, 1.0 - lam * math.log1p(k * rec.effort) / k)
    assert slow.reward < quick.reward


def test_every_term_is_logged_per_version_with_its_fraction_nonzero(env, tmp_path):
    w = worker(env, tmp_path)
    plan = call("todo_write", todos=[{"id": "1", "content": "x", "status": "pending"}])
    recs = [run(w, fix()), run(w, plan + fix()), run(w, "Nothing to do.")]
    m = summarize_groups([GroupRecord(0, TASK.task_id, 0, recs)])
    assert set(TERMS) <= {k.split("/", 1)[1] for k in m if k.startswith("term/")}
    close(m["term/success"], 2 / 3)
    close(m["term_nonzero/success"], 2 / 3)
    close(m["term/todos"], -COEFS["todo_coef"] / 3)
    close(m["term_nonzero/todos"], 1 / 3)
    assert m["term_nonzero/denied_egress"] == 0.0
    line = progress_line({f"batch/{k}": v for k, v in m.items()})
    assert "terms: success=+0.667(0.67)" in line and "todos=-0.017(0.33)" in line


# ruff is a requirement (requirements.txt): no skip, a missing ruff fails here
@pytest.mark.parametrize("flaws, lint, todo_comments", [((), 0, 0), (("lint",), 1, 0), (("todo_comment",), 0, 1),
                                                        (("lint", "todo_comment"), 1, 1)])
def test_teacher_flaws_are_what_the_aux_terms_measure(env, tmp_path, flaws, lint, todo_comments):
    # The imperfect teacher's habits (rl.tasks.TEACHER_FLAWS) pass the hidden check and cost exactly their terms.
    rec = run(worker(env, tmp_path, lint_coef=LINT_COEF), *tasks.oracle_replies(TASK, True, flaws=flaws))
    assert rec.success == 1.0
    assert (rec.breakdown["reward/lint_findings"], rec.breakdown["reward/n_todo_comments"]) == (lint, todo_comments)
    close(rec.reward, 1.0 - lint * LINT_COEF - todo_comments * COEFS["todo_comment_coef"])


# ruff is a requirement (requirements.txt): no skip, a missing ruff fails here
def test_measure_all_logs_the_behaviour_of_terms_with_no_weight(env, tmp_path):
    # An ablation with the lint and TODO-comment terms off still sees the behaviour they judge; the reward does not.
    flawed = tasks.oracle_replies(TASK, False, flaws=("lint", "todo_comment"))
    off = dict(lint_coef=0.0, todo_comment_coef=0.0)
    unmeasured = run(worker(env, tmp_path, **off), *flawed)
    assert unmeasured.breakdown["reward/lint_findings"] == 0  # no ruff run without weight: not measured
    recs = [run(worker(env, tmp_path, measure_all=True, **off), *flawed),
            run(worker(env, tmp_path, measure_all=True, **off), *tasks.oracle_replies(TASK, False))]
    assert [r.reward for r in recs] == [1.0, 1.0]
    m = summarize_groups([GroupRecord(0, TASK.task_id, 0, recs)])
    assert (m["measure/lint_findings"], m["measure_nonzero/lint_findings"]) == (0.5, 0.5)
    assert (m["measure/n_todo_comments"], m["measure_nonzero/n_todo_comments"]) == (0.5, 0.5)
    assert m["term_nonzero/readability"] == m["term_nonzero/todo_comments"] == 0.0
