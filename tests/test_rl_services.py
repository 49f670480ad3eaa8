"""RL services without a model: the task family, staleness control, the group buffer, weight-delta statistics,
router-replay records, grading in a fresh fork, the environment worker, oracle transcripts, and the embedded
orchestrator under faults (scripted rollouts and a counting trainer stand in for the JAX services)."""

import json
import os
import random
import subprocess
import threading
import time

import jax
import numpy as np
import pytest

from composer2_jax.bench.policies import ScriptedPolicy, call
from composer2_jax.bench.task import load_suite
from composer2_jax.data import tokenizer as tk
from composer2_jax.data.chat import render_chat
from composer2_jax.env import Environment, SandboxLimits
from composer2_jax.env import testing as envtest
from composer2_jax.env.harness import HarnessConfig
from composer2_jax.episode import Episode, Segment, Turn
from composer2_jax.rl import tasks
from composer2_jax.rl.curriculum import TaskCurriculum
from composer2_jax.rl.grading import grade_task
from composer2_jax.rl.records import Counters, GroupRecord
from composer2_jax.rl.rewards import RewardConfig
from composer2_jax.rl.run_config import LoopConfig, RLConfig
from composer2_jax.rl.services.buffer import GroupBuffer
from composer2_jax.rl.services.env_worker import EnvWorker
from composer2_jax.rl.services.local import LocalOrchestrator
from composer2_jax.rl.services.oracle import write_oracle_transcripts
from composer2_jax.rl.services.routing import CallRecord, episode_routing, pack_routing, segment_routing
from composer2_jax.rl.services.staleness import StalenessGate, is_fresh
from composer2_jax.rl.services.testing import CountingTrainer, FaultyEnv, ScriptedRollout
from composer2_jax.rl.services.weight_delta import apply_delta, delta_stats, encode_delta, full_bytes
from composer2_jax.rl.services.weights import Weights, WeightStore
from composer2_jax.rl.trajectory import pack_segments
from tests.markers import needs_sandbox

TOK = tk.ByteTokenizer()
HARNESS = HarnessConfig(max_turns=4, max_new_tokens=192, max_total_tokens=1024, context_budget=352,
                        summary_tokens=64, system_prompt="Fix the bug.", summary_prompt="Summarize your progress.")
TOOLS = ("read_file", "edit_file", "submit")


# ------------------------------------------------------------------------------------------------ the task family


def run_check(task, files, tmp_path):
    """Run the task's hidden check (its Harbor folder's test.sh: the verdict runner judging in place) on a repository
    of `files`; (reward.txt, verdict counts)."""
    repo, logs = tmp_path / "repo", tmp_path / "logs"
    envtest.make_repo(str(repo), files)
    folder = tasks.write_task_folder(task, tmp_path / "suite")
    subprocess.run(["bash", str(folder / "tests" / "test.sh")], cwd=repo, check=True, capture_output=True,
                   env={"PATH": os.environ["PATH"], "TESTS_DIR": str(folder / "tests"), "LOGS_DIR": str(logs)})
    verdict = json.loads((logs / "verifier" / "verdict.json").read_text())
    counts = {k: verdict[k] for k in ("passed", "failed", "errors")}
    return (logs / "verifier" / "reward.txt").read_text().strip(), counts


def test_task_family_difficulty_knob_and_check(tmp_path):
    easy, hard = tasks.make_task(3, 0), tasks.make_task(3, 3)
    assert easy == tasks.make_task(3, 0)  # deterministic in (seed, level)
    assert len(easy.functions) == 1 and len(hard.functions) == 4  # level = number of distractors
    assert easy.difficulty == "easy" and hard.difficulty == "hard"
    assert f"bug: a {easy.wrong_op} b" in easy.instruction and "bug" not in hard.instruction
    assert easy.wrong_op == tasks.EASY_WRONG_OP and easy.right_op == "+"  # easy: the same fix every time
    assert {tasks.make_task(s, 3).wrong_op for s in range(40)} == set(tasks.WRONG_OPS)  # hard: read it in the file
    assert tasks.fix_call(easy) == tasks.fix_call(tasks.make_task(4, 1))
    reward, results = run_check(hard, hard.fixed_files(), tmp_path / "fixed")
    assert reward == "1" and results == {"passed": 20, "failed": 0, "errors": 0}
    reward, results = run_check(hard, hard.files(), tmp_path / "buggy")
    assert reward == "0" and results["failed"] == 5  # only the target's five cases fail
    broken = {tasks.FILE: hard.fixed_files()[tasks.FILE].replace(f"def {hard.functions[-1][0]}", "def zzz")}
    if hard.functions[-1][0] != hard.target:  # a distractor renamed: its cases fail
        assert run_check(hard, broken, tmp_path / "renamed")[0] == "0"


def test_heldout_split_is_disjoint_by_content():
    train = {(t.functions, t.target, t.right_op) for t in tasks.task_set(3000, 0)}
    held = tasks.task_set(48, 10**6, levels=(1, 2, 3), split="heldout", distinct=True)
    assert len(held) == 48 and len({(t.functions, t.target, t.right_op) for t in held}) == 48
    assert not train & {(t.functions, t.target, t.right_op) for t in held}
    assert {t.level for t in held} == {1, 2, 3}
    with pytest.raises(ValueError, match="too small"):  # level 0: 16 names × 1 bug, a fifth of them held out
        tasks.task_set(16, 0, levels=(0,), split="heldout", distinct=True)


def test_oracle_reads_first_on_hard_tasks_and_sometimes_on_easy():
    easy = tasks.task_set(200, 0, levels=(0, 1))
    reads = [tasks.oracle_reads(t, 0.5, 0) for t in easy]
    assert 0.35 < np.mean(reads) < 0.65
    assert all(tasks.oracle_reads(t, 0.0, 0) for t in tasks.task_set(20, 0, levels=(2, 3)))
    assert len(tasks.oracle_replies(easy[0], False)) == 1 and len(tasks.oracle_replies(easy[0], True)) == 2


# ------------------------------------------------------------------------------------------------ staleness


def test_gate_admits_up_to_version_plus_eta_plus_one_batches():
    gate = StalenessGate(eta=1, groups_per_batch=3)
    got = [gate.try_admit(0) for _ in range(7)]
    assert got == [0, 1, 2, 3, 4, 5, None]  # (0 + 1 + 1)·3 = 6 slots at version 0
    assert gate.try_admit(1) == 6 and gate.admitted == 7
    gate.release(2)  # two dropped groups give their slots back; indices are never reused
    assert [gate.try_admit(1) for _ in range(5)] == [7, 8, 9, 10, None]  # (1 + 1 + 1)·3 = 9 slots
    sync = StalenessGate(eta=0, groups_per_batch=2)
    assert [sync.try_admit(0) for _ in range(3)] == [0, 1, None]  # η = 0: one batch at a time
    assert is_fresh(3, 5, 2) and not is_fresh(2, 5, 2)


def _record(version):
    """An EpisodeRecord-like object whose trained tokens carry `version`."""
    from composer2_jax.rl.records import EpisodeRecord

    seg = Segment((Turn("system", (1,), False), Turn("message", (2, 3), True, (-0.5, -0.5), version)))
    return EpisodeRecord(Episode((seg,), 1.0), [None], "t", "easy", 1.0, 1.0, 0.0, {}, "submitted", 1, 0, 0, 2, 0.0,
                         0.0, version)


def test_buffer_takes_oldest_fresh_groups_and_drops_stale_ones():
    gate, counters = StalenessGate(eta=1, groups_per_batch=2), Counters()
    for _ in range(6):
        gate.try_admit(10)
    buf = GroupBuffer(gate, counters)
    for gid, v in [(3, 5), (1, 4), (2, 5), (0, 2)]:
        buf.put(GroupRecord(gid, "t", v, [_record(v), _record(v)]))
    got = buf.take(2, version=5, stop=threading.Event())
    assert [g.group_id for g in got] == [1, 2]  # group 0 (version 2) is stale at 5 with η = 1: dropped
    assert counters.get("groups_stale_dropped") == 1 and gate.admitted == 5
    assert buf.take(2, version=5, stop=threading.Event(), timeout_s=0.05) is None  # only group 3 left


# ------------------------------------------------------------------------------------------------ weights


def test_weight_delta_counts_identical_bf16_values_and_compresses_the_xor():
    rng = np.random.default_rng(0)
    a = {"w": rng.normal(size=(64, 64)).astype(np.float32), "b": np.zeros(64, np.float32)}
    same = delta_stats(a, a)
    assert same["identical_frac"] == 1.0 and same["bf16_bytes"] == 2 * (64 * 64 + 64)
    assert same["compression"] > 50
    b = {"w": a["w"].copy(), "b": a["b"].copy()}
    b["w"][:8] += 1.0  # 512 of 4160 values change in bf16
    stats = delta_stats(a, b)
    assert stats["identical_frac"] == pytest.approx(1 - 512 / 4160)
    assert same["xor_zlib_bytes"] < stats["xor_zlib_bytes"] < stats["bf16_bytes"]
    tiny = {"w": a["w"] * (1 + 1e-5), "b": a["b"]}  # below bf16 resolution: bit-identical
    assert delta_stats(a, tiny)["identical_frac"] > 0.95


def _bitwise_equal(a, b) -> None:
    """Same tree, same dtypes, same bit patterns (NaN payloads and signed zeros included)."""
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(np.asarray(x).view(f"u{x.dtype.itemsize}"),
                                      np.asarray(y).view(f"u{y.dtype.itemsize}"))


def test_weight_deltas_reconstruct_the_next_version_bit_for_bit_and_pick_the_smallest_encoding():
    import ml_dtypes

    rng = np.random.default_rng(1)
    dense = rng.normal(size=(64, 64)).astype(np.float32)
    prev = Weights(3, {"dense": dense, "few": rng.normal(size=4096).astype(np.float32),
                       "bf16": rng.normal(size=(32, 32)).astype(ml_dtypes.bfloat16),
                       "same": np.arange(100, dtype=np.float32), "odd": np.array([0.0, 1.0, 2.0], np.float32)},
                   {"bias": np.zeros(8, np.float32)})
    few = prev.params["few"].copy()
    few[[5, 700, 4000]] += 1.0  # 3 of 4096 values: indices + values win
    bf16 = prev.params["bf16"].copy()
    bf16[:2] = (bf16[:2].astype(np.float32) * 1.01).astype(ml_dtypes.bfloat16)  # 64 of 1024: sparse or xor
    new = Weights(4, {"dense": dense + rng.normal(size=dense.shape).astype(np.float32),  # all values, random bits
                      "few": few, "bf16": bf16, "same": prev.params["same"],
                      "odd": np.array([np.nan, -0.0, 2.0 * (1 + 2 ** -23)], np.float32)},
                  {"bias": np.full(8, 1e-3, np.float32)})
    delta = encode_delta(prev, new)
    got = apply_delta(prev, delta)
    assert got.version == 4
    _bitwise_equal((got.params, got.router_state), (new.params, new.router_state))
    kinds = dict(zip(sorted(new.params), [k for k, _ in delta.leaves[:-1]]))  # the last leaf: router_state's
    assert kinds["few"] == "sparse" and kinds["same"] == "sparse" and kinds["dense"] in ("full", "xor")
    assert delta.kinds()["sparse"] >= 2 and delta.nbytes < full_bytes(new)
    assert dict(zip(sorted(new.params), delta.leaves[:-1]))["same"][1][0].size == 0  # nothing sent for it
    assert prev.params["few"][5] != few[5]  # the receiver's previous version was not mutated
    with pytest.raises(ValueError, match="from version 3, but the receiver holds version 4"):
        apply_delta(got, delta)
    with pytest.raises(ValueError, match="a delta goes forward"):
        encode_delta(new, prev)


def test_weight_store_publishes_increasing_versions_and_waits():
    store = WeightStore()
    assert store.version == -1
    store.publish(Weights(0, {}, {}))
    with pytest.raises(ValueError, match="does not exceed"):
        store.publish(Weights(0, {}, {}))
    threading.Timer(0.05, lambda: store.publish(Weights(1, {}, {}))).start()
    assert store.wait_for(1, timeout_s=2).version == 1
    assert store.wait_for(5, timeout_s=0.01) is None


# ------------------------------------------------------------------------------------------------ router replay


def test_segment_routing_uses_each_calls_decode_routing_over_its_sampled_positions():
    L, k = 2, 2
    seg = list(range(10))
    first = CallRecord(tuple(seg[:3]), tuple(seg[3:5]), np.full((2, L, k), 7), np.full((2, L, k), 1))
    second = CallRecord(tuple(seg[:7]), tuple(seg[7:9]), np.full((2, L, k), 9), np.full((6, L, k), 3))
    rec = segment_routing(10, [first, second], L, k)
    assert rec.shape == (L, 10, k)
    assert (rec[:, :2] == 3).all()  # prompt positions 0..1 as the last call prefilled them
    assert (rec[:, 2:4] == 7).all()  # positions 2, 3 produced the first call's tokens 3, 4
    assert (rec[:, 4:6] == 3).all()  # observation positions from the last prefill
    assert (rec[:, 6:8] == 9).all()  # positions 6, 7 produced tokens 7, 8
    assert (rec[:, 8:] == np.arange(k)).all()  # nothing recorded: filler experts 0..k−1


def test_routing_records_follow_packed_placements():
    def seg(n, start):
        return Segment((Turn("system", (start,), False),
                        Turn("message", tuple(range(start + 1, start + n)), True, (-1.0,) * (n - 1), 0)))

    ep = Episode((seg(4, 10), seg(3, 50)), 1.0)
    calls = [CallRecord((10,), (11, 12, 13), np.full((3, 1, 2), 5), np.zeros((0, 1, 2), np.int32)),
             CallRecord((50,), (51, 52), np.full((2, 1, 2), 6), np.zeros((0, 1, 2), np.int32))]
    recs = episode_routing(ep, calls, num_layers=1, k=2)
    assert [r.shape for r in recs] == [(1, 4, 2), (1, 3, 2)]
    assert (recs[0][:, :3] == 5).all() and (recs[1][:, :2] == 6).all()
    packed = pack_segments([(s, 1.0) for s in ep.segments], seq_len=8, batch_size=2)
    out = pack_routing(packed.placements, recs, 2, 8, 1, 2)
    assert out.shape == (1, 2, 8, 2)
    assert (out[0, 0, 0:3] == 5).all() and (out[0, 0, 4:6] == 6).all()  # both segments share row 0
    assert (out[0, 1] == np.arange(2)).all()


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
def test_grading_runs_the_hidden_check_in_a_fresh_fork_and_ignores_planted_results(env, worker):
    task = tasks.make_task(5, 2)
    sid = env.fork(worker.snapshot(task))
    assert grade_task(env, sid, task).reward == 0.0
    env.call(sid, "write_file", {"path": "calc.py", "content": task.fixed_files()[tasks.FILE]})
    env.call(sid, "run_terminal_cmd", {"command": "mkdir -p /tmp/logs/verifier && echo 1 > /tmp/logs/verifier/"
                                                  "reward.txt && sleep 30 &"})
    g = grade_task(env, sid, task)
    assert g.reward == 1.0 and g.tests.passed == 15 and g.error is None
    env.call(sid, "write_file", {"path": "calc.py", "content": "import os\nos.makedirs('/tmp/logs/verifier', "
                                                              "exist_ok=True)\nopen('/tmp/logs/verifier/reward.txt',"
                                                              " 'w').write('1')\n"})
    assert grade_task(env, sid, task).reward == 0.0  # calc answers no values; its files are not the verdict
    ls = env.call(sid, "run_terminal_cmd", {"command": "ls -a /tmp 2>&1 || true"})
    assert ".verifier-" not in ls.content  # the agent's sandbox never saw the check
    env.close(sid)


@needs_sandbox
def test_env_worker_rewards_success_minus_effort(env, worker):
    task = tasks.make_task(11, 0)
    direct = worker.run(task, ScriptedPolicy(TOK, tasks.oracle_replies(task, False), HARNESS), admitted_version=3)
    careful = worker.run(task, ScriptedPolicy(TOK, tasks.oracle_replies(task, True), HARNESS), admitted_version=3)
    wrong = worker.run(task, ScriptedPolicy(TOK, [call("submit")], HARNESS), admitted_version=3)
    assert direct.success == careful.success == 1.0 and wrong.success == 0.0
    assert direct.stop_reason == "submitted" and (direct.turns, careful.turns) == (1, 2)
    assert direct.effort < careful.effort and 1.0 > direct.reward > careful.reward > 0.5
    assert wrong.reward == 0.0  # the penalty is charged to successes only
    assert direct.admitted_version == 3 and direct.routing == [None]
    assert env.sandboxes() == []  # every sandbox (episode and grading forks) was closed


@needs_sandbox
def test_env_worker_closes_the_sandbox_when_a_tool_call_raises(env, tmp_path):
    faulty = FaultyEnv(env, fail=lambda n: n == 1)
    w = EnvWorker(faulty, TOK, HARNESS, RewardConfig(), TOOLS, schemas_in_prompt=False, repo_root=tmp_path)
    task = tasks.make_task(1, 0)
    with pytest.raises(RuntimeError, match="injected environment fault"):
        w.run(task, ScriptedPolicy(TOK, tasks.oracle_replies(task, False), HARNESS), 0)
    assert env.sandboxes() == []


@needs_sandbox
def test_oracle_transcripts_render_to_the_rl_context(worker, tmp_path):
    path = tmp_path / "oracle.jsonl"
    out = write_oracle_transcripts(worker, tasks.task_set(6, 0), path, read_prob=0.5, threads=3)
    assert out == {"written": 6, "teacher_errors": 0, "failed": 0}
    records = [json.loads(line) for line in path.read_text().splitlines()]
    task = tasks.make_task(0, 0)
    rec = next(r for r in records if r["task_id"] == task.task_id)
    policy = ScriptedPolicy(TOK, tasks.oracle_replies(task, rec["read_first"]), HARNESS)
    episode = worker.run(task, policy, 0).episode
    rendered = render_chat(rec["messages"], TOK)
    seg = episode.segments[0]
    n = len(rendered.ids)
    assert rendered.ids == seg.tokens()[:n].tolist()  # SFT sees exactly the context RL builds
    assert rendered.loss_mask[1:] == seg.loss_mask()[1:n].astype(int).tolist()
    assert rec["messages"][-1]["role"] == "assistant"  # trailing observations dropped


def test_imperfect_teacher_writes_wrong_wellformed_fixes_at_its_rate():
    pool = tasks.task_set(400, 3)
    for rate in (0.0, 0.3, 1.0):
        ops = [tasks.teacher_op(t, rate, seed=1) for t in pool]
        wrong = [op != t.right_op for op, t in zip(ops, pool)]
        assert abs(np.mean(wrong) - rate) < 0.07
        assert all(op != t.wrong_op for op, t in zip(ops, pool))  # the edit's old_string still matches
    assert tasks.teacher_op(pool[0], 0.3, 1) == tasks.teacher_op(pool[0], 0.3, 1)  # deterministic per task and seed


@needs_sandbox
def test_imperfect_teacher_transcripts_are_kept_unverified(worker, tmp_path):
    path = tmp_path / "oracle.jsonl"
    pool = tasks.task_set(8, 5)
    out = write_oracle_transcripts(worker, pool, path, read_prob=0.5, threads=4, error_rate=0.5)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    errors = [r for r in records if r["teacher_error"]]
    assert out == {"written": 8, "teacher_errors": len(errors), "failed": 0} and 0 < len(errors) < 8
    assert all(r["success"] == 0.0 for r in errors) and all(r["success"] == 1.0 for r in records if r not in errors)
    for r in errors:  # the wrong operator is in the edit the transcript teaches
        task = next(t for t in pool if t.task_id == r["task_id"])
        edit = json.dumps({"new_string": f"return a {tasks.teacher_op(task, 0.5, 0)} b"})[1:-1]
        assert edit in json.dumps(r["messages"]) and tasks.teacher_op(task, 0.5, 0) != task.right_op


@needs_sandbox
def test_suite_folders_load_and_grade_with_the_benchmark_runner(env, tmp_path):
    from composer2_jax.bench.policies import make_agent
    from composer2_jax.bench.runner import run_suite
    from composer2_jax.rl.services.tool_view import ToolView

    suite = load_suite(tasks.write_suite(tasks.task_set(4, 0), tmp_path / "suite"))
    assert [t.difficulty for t in suite.tasks] == ["easy", "easy", "hard", "hard"]
    view = ToolView(env, TOOLS + ("run_terminal_cmd",), schemas_in_prompt=False)
    cfg = HarnessConfig(max_new_tokens=4096, system_prompt=HARNESS.system_prompt)  # the bench oracle uploads files
    oracle = run_suite(view, suite, make_agent("oracle", cfg, TOK), workers=2)
    null = run_suite(view, suite, make_agent("null", cfg, TOK), workers=2)
    assert [t.passed for t in oracle] == [True] * 4 and [t.passed for t in null] == [False] * 4


# ------------------------------------------------------------------------------------------------ orchestration


def run_loop(env, tmp_path, eta, steps=4, fault=None, faulty_env=None, latency=None, groups=2, samples=3,
             orchestrator=LocalOrchestrator):
    """The embedded loop with a scripted rollout and a counting trainer; returns (trainer, counters, history)."""
    store, counters = WeightStore(), Counters()
    rollout = ScriptedRollout(store, p_correct=0.6, latency=latency, seed=eta)
    trainer = CountingTrainer(eta)
    worker = EnvWorker(faulty_env or env, TOK, HARNESS, RewardConfig(), TOOLS, schemas_in_prompt=False,
                       repo_root=tmp_path)
    rl = RLConfig(eta=eta, samples=samples, steps=steps, groups_per_batch=groups,
                  loop=LoopConfig(episode_threads=8, max_retries=1, take_timeout_s=120))
    orch = orchestrator(trainer, rollout, worker, TaskCurriculum(tasks.task_set(40, 0)), rl, store, counters)
    history = orch.run(on_version=(lambda m: fault(rollout, m)) if fault else None)
    return trainer, counters, history


@needs_sandbox
@pytest.mark.parametrize("eta", [0, 2])
def test_loop_respects_the_staleness_bound(env, tmp_path, eta):
    trainer, counters, history = run_loop(env, tmp_path, eta, latency=lambda rng: rng.expovariate(1 / 0.02))
    assert trainer.version == 4 and len(trainer.consumed) == 4
    assert trainer.violations == 0 and max(m["staleness_max"] for m in history) <= eta
    if eta == 0:  # synchronous: every batch was generated entirely by the version that trains on it
        assert all(m["staleness_max"] == 0 for m in history)
    admitted = counters.get("groups_admitted")
    assert admitted <= (4 + eta + 1) * 2  # admission never ran more than η versions ahead
    assert all(len(g.episodes) == 3 for batch in trainer.consumed for g in batch)
    rewards = [e.reward for batch in trainer.consumed for g in batch for e in g.episodes]
    assert 0 < np.mean([r > 0 for r in rewards]) < 1  # scripted rollouts succeed sometimes


@needs_sandbox
def test_env_faults_are_retried_or_dropped_and_the_trainer_never_stalls(env, tmp_path):
    rng = random.Random(0)
    faulty = FaultyEnv(env, fail=lambda n: rng.random() < 0.15)
    trainer, counters, history = run_loop(env, tmp_path, eta=1, faulty_env=faulty)
    assert trainer.version == 4 and faulty.raised > 0
    c = counters.snapshot()
    # every injected fault failed one attempt; once the loop stops, a failing attempt is counted as cut at stop
    assert c["episode_failures"] + c.get("episodes_cut_at_stop", 0) >= faulty.raised
    assert c["episodes_retried"] >= 1
    assert c["episodes_done"] >= 4 * 2 * 2  # every consumed group kept at least min_group episodes


@needs_sandbox
def test_a_run_whose_every_episode_fails_stops_at_once_naming_the_failure(env, tmp_path):
    """Every sandbox call fails: the run stops after rl.loop.max_dropped_in_a_row drops with the last error, instead
    of admitting groups that can only fail until the trainer's take timeout (120 s here)."""
    faulty = FaultyEnv(env, fail=lambda n: True)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"64 episodes dropped in a row .*max_dropped_in_a_row=64.*the last, of "):
        run_loop(env, tmp_path, eta=1, faulty_env=faulty)
    assert time.monotonic() - t0 < 60 and faulty.raised >= 64 * 2  # every drop took 1 + max_retries attempts


@needs_sandbox
def test_a_bug_in_an_episode_job_stops_the_run_naming_it(env, tmp_path):
    """An exception past run_episode's own handling (a bug of the loop, as a retry-path AttributeError once was under
    Ray) stops the run with that error, instead of leaving its group unfinished for the trainer's take timeout."""

    class Buggy(LocalOrchestrator):
        calls = 0

        def run_episode(self, task, version, checkpoint=None):
            Buggy.calls += 1
            if Buggy.calls == 7:
                raise TypeError("bookkeeping bug")
            return super().run_episode(task, version, checkpoint)

    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"the episode job of \S+ raised TypeError: bookkeeping bug"):
        run_loop(env, tmp_path, eta=1, steps=6, orchestrator=Buggy)
    assert time.monotonic() - t0 < 60  # the take timeout is 120 s


@needs_sandbox
def test_a_killed_rollout_worker_is_restarted_and_its_episodes_retried(env, tmp_path):
    killed = []

    def kill_at_version_2(rollout, metrics):
        if metrics["version"] == 2 and not killed:
            rollout.inject_fault(RuntimeError("rollout worker killed"))
            killed.append(True)

    trainer, counters, _ = run_loop(env, tmp_path, eta=1, fault=kill_at_version_2, steps=5)
    assert trainer.version == 5 and killed
    c = counters.snapshot()
    assert c.get("rollout_restarts", 0) >= 1 and c["episode_failures"] >= 1 and c["episodes_retried"] >= 1


def test_draft_acceptance_is_logged_per_publication_window():
    """rollout/acceptance at a publication = accepted / drafted since the previous one (counters restored from a
    checkpoint are not counted again); a window without drafts logs no acceptance."""
    counters = Counters({"rollout_drafted": 50, "rollout_accepted": 50})  # a resumed run's counts
    orch = LocalOrchestrator(CountingTrainer(eta=0), None, None, None, RLConfig(), WeightStore(), counters)
    orch.draft_metrics()  # as run() does after publishing the start version
    counters.add("rollout_drafted", 10)
    counters.add("rollout_accepted", 7)
    assert orch.draft_metrics() == {"rollout/drafted": 10.0, "rollout/acceptance": 0.7}
    counters.add("rollout_drafted", 4)
    counters.add("rollout_accepted", 1)
    assert orch.draft_metrics() == {"rollout/drafted": 4.0, "rollout/acceptance": 0.25}
    assert orch.draft_metrics() == {"rollout/drafted": 0.0}


@needs_sandbox
def test_every_version_logs_the_acceptance_of_the_drafts_made_since_the_last(env, tmp_path):
    """Each published version's metrics carry the drafts of its window; together they are every draft of the run."""
    store, counters = WeightStore(), Counters()

    class DraftingRollout(ScriptedRollout):
        def generate(self, prompt, max_new_tokens):
            counters.add("rollout_drafted", 4)  # as RolloutWorker._count_drafts: 2 of 4 drafts accepted per reply
            counters.add("rollout_accepted", 2)
            return super().generate(prompt, max_new_tokens)

    worker = EnvWorker(env, TOK, HARNESS, RewardConfig(), TOOLS, schemas_in_prompt=False, repo_root=tmp_path)
    rl = RLConfig(eta=0, samples=2, steps=3, groups_per_batch=2,
                  loop=LoopConfig(episode_threads=4, max_retries=1, take_timeout_s=120))
    orch = LocalOrchestrator(CountingTrainer(0), DraftingRollout(store, p_correct=0.6), worker,
                             TaskCurriculum(tasks.task_set(40, 0)), rl, store, counters)
    history = orch.run()
    assert [m["rollout/acceptance"] for m in history] == [0.5] * 3
    assert sum(m["rollout/drafted"] for m in history) <= counters.get("rollout_drafted")
    assert all(m["rollout/drafted"] >= 4 * rl.samples * rl.groups_per_batch for m in history)


@needs_sandbox
def test_training_continues_while_an_evaluation_is_in_progress(env, tmp_path):
    """The evaluator is its own service pulling published versions: the trainer publishes versions 1..4 while
    the evaluation of version 0 is still running, and the evaluator then picks up the newest due version."""
    from composer2_jax.rl.services.evaluator import EvalService

    store, counters = WeightStore(), Counters()
    release, seen_during_eval = threading.Event(), []

    def slow_evaluate(weights):
        if weights.version == 0:  # hold the first evaluation until the trainer has moved on
            release.wait(120)
            seen_during_eval.append(store.version)
        return {"eval/pass_rate": 0.0}

    service = EvalService(store, slow_evaluate, every=2)
    service.start()
    trainer = CountingTrainer(eta=1)
    worker = EnvWorker(env, TOK, HARNESS, RewardConfig(), TOOLS, schemas_in_prompt=False, repo_root=tmp_path)
    rl = RLConfig(eta=1, samples=2, steps=4, groups_per_batch=2,
                  loop=LoopConfig(episode_threads=8, max_retries=1, take_timeout_s=120))
    orch = LocalOrchestrator(trainer, ScriptedRollout(store, p_correct=0.6), worker,
                             TaskCurriculum(tasks.task_set(40, 0)), rl, store, counters)
    busy_at_version = []
    history = orch.run(on_version=lambda m: busy_at_version.append(service.busy.is_set()))
    release.set()
    results = service.finish(final_version=trainer.version, timeout_s=60)
    assert len(history) == 4 and all(busy_at_version)  # every version was trained during evaluation 0
    assert seen_during_eval == [4]
    assert [r["eval/version"] for r in results] == [0.0, 4.0]  # then the newest due version (4; 2 was passed by)


def test_teacher_flaws_are_drawn_per_task_and_validated():
    task_list = tasks.task_set(200, 3, (1, 2))
    drawn = [tasks.teacher_flaws(t, {"lint": 0.3, "todo_comment": 0.6}, seed=5) for t in task_list]
    assert drawn == [tasks.teacher_flaws(t, {"lint": 0.3, "todo_comment": 0.6}, seed=5) for t in task_list]
    lint, todo = (sum(name in d for d in drawn) / len(drawn) for name in ("lint", "todo_comment"))
    assert 0.2 < lint < 0.4 and 0.5 < todo < 0.7  # independent draws at their rates
    assert all(tasks.teacher_flaws(t, {}, seed=5) == () for t in task_list[:10])
    fix = tasks.fix_call(task_list[0], flaws=("lint", "todo_comment"))
    assert "b;  # TODO: check the other operators" in fix
    with pytest.raises(ValueError, match="teacher flaws \\['typo'\\]"):
        tasks.teacher_flaws(task_list[0], {"typo": 0.5}, seed=0)
