"""RL services with a real (micro) model: the rollout worker's behaviour log-probs and routing against the
trainer's recomputation under router replay, the direction of the policy-gradient update, partial rollouts across
a weight update, and the whole run (`orchestrator.run_rl`) with a checkpoint and a resume."""

import dataclasses
import threading

import jax
import numpy as np
import pytest

from composer2_jax import schema
from composer2_jax.data import tokenizer as tk
from composer2_jax.episode import SegmentBuilder
from composer2_jax.losses.rl import PolicyLossConfig
from composer2_jax.rl import orchestrator
from composer2_jax.rl.records import EpisodeRecord, GroupRecord
from composer2_jax.rl.services.rollout import RolloutConfig, RolloutPolicy, RolloutWorker
from composer2_jax.rl.services.routing import episode_routing
from composer2_jax.rl.services.testing import micro_model_config
from composer2_jax.rl.services.trainer import RL_LOSS, PolicyLaw, Trainer, TrainerConfig
from composer2_jax.rl.services.weights import Weights, WeightStore
from composer2_jax.train.optim import OptimConfig
from tests.markers import needs_sandbox
from tests.tolerances import FP32_FN, ROLLOUT_VS_TRAINER_LOGP_ATOL

TOK = tk.ByteTokenizer()
CFG = micro_model_config()
RC = RolloutConfig(batch_size=4, prompt_len=64, max_new_tokens=16, temperature=1.0)


@pytest.fixture(scope="module")
def trainer():
    oc = OptimConfig(lr=3e-2, schedule="constant", warmup_steps=0, weight_decay=0.0, clip_norm=0.0)
    return Trainer(CFG, oc, TrainerConfig(rows=4, seq_len=96), seed=1)


@pytest.fixture(scope="module")
def rollout(trainer):
    store = WeightStore()
    store.publish(trainer.weights())
    worker = RolloutWorker(CFG, store, RC, stop_id=TOK.special_id(tk.IM_END))
    stop = threading.Event()
    worker.start(stop)
    yield worker
    stop.set()
    worker.close(RuntimeError("test over"))


def two_turn_episode(policy: RolloutPolicy, seed: int, reward: float, cfg=CFG) -> EpisodeRecord:
    """system + task, a sampled reply, an observation, a second sampled reply — with routing records."""
    rng = np.random.default_rng(seed)
    b = SegmentBuilder(rng.integers(0, 256, 5).tolist(), rng.integers(0, 256, 9).tolist(), [1, 2], 256)
    for turn in range(2):
        c = policy.generate(b.context, 12)
        b.append(c.ids, True, c.logprobs, policy_version=c.policy_version)
        if turn == 0:
            b.append(rng.integers(0, 256, 6).tolist(), False)
    ep = b.finish(reward=reward)
    routing = episode_routing(ep, policy.calls, 1, cfg.num_experts_per_tok)
    return EpisodeRecord(ep, routing, "t", "easy", reward, reward, 0.0, {}, "submitted", 2, 0, 0, 24, 0.0, 0.0,
                         ep.min_policy_version)


def test_trainer_logprobs_under_router_replay_match_the_samplers(trainer, rollout):
    # episode 0 without a session (one-reply sessions), 1 and 2 keep theirs: the resident cache gives the same μ
    eps = [two_turn_episode(RolloutPolicy(rollout.generate, session=None if s == 0 else f"ep{s}"), s, 1.0)
           for s in range(3)]
    packed, routing = trainer.pack([GroupRecord(0, "t", 0, eps)])
    assert routing.shape == (1, 4, 96, CFG.num_experts_per_tok)
    logp = trainer.token_logprobs(packed, slice(0, 4), routing)
    m = packed.loss_mask > 0
    assert m.sum() == sum(e.episode.num_trainable for e in eps)
    np.testing.assert_allclose(logp[m], packed.behav_logprobs[m], atol=ROLLOUT_VS_TRAINER_LOGP_ATOL)  # π_θ(v0) = μ
    wrong = (routing + 1) % CFG.n_routed_experts  # other experts: replay visibly changes the forward pass
    logp_wrong = trainer.token_logprobs(packed, slice(0, 4), wrong)
    assert np.abs(logp_wrong[m] - packed.behav_logprobs[m]).max() > 1e-3


def test_padded_vocabulary_is_never_sampled_and_the_trainer_uses_the_same_softmax():
    """A model vocabulary padded beyond the tokenizer's: the rollout engine samples only the tokenizer's ids, and the
    trainer's π_θ is the softmax over those ids (= μ at version 0); without the limit π_θ is visibly different."""
    cfg = micro_model_config(vocab_size=TOK.vocab_size + 61)
    limit = orchestrator.vocab_limit(TOK, cfg.vocab_size)
    assert limit == TOK.vocab_size and orchestrator.vocab_limit(TOK, TOK.vocab_size) == 0
    with pytest.raises(ValueError, match=f"tokenizer has {TOK.vocab_size} ids but the model's vocab_size is 200"):
        orchestrator.vocab_limit(TOK, 200)
    oc = OptimConfig(lr=1e-3, schedule="constant", warmup_steps=0, weight_decay=0.0, clip_norm=0.0)
    limited = Trainer(cfg, oc, TrainerConfig(rows=4, seq_len=96), law=PolicyLaw(vocab_limit=limit), seed=2)
    free = Trainer(cfg, oc, TrainerConfig(rows=4, seq_len=96), seed=2)
    store = WeightStore()
    store.publish(limited.weights())
    worker = RolloutWorker(cfg, store, dataclasses.replace(RC, max_new_tokens=32), stop_id=TOK.special_id(tk.IM_END),
                           vocab_limit=limit)
    stop = threading.Event()
    worker.start(stop)
    policies = [RolloutPolicy(worker.generate, TOK.vocab_size) for _ in range(3)]
    try:
        eps = [two_turn_episode(p, s, 1.0, cfg) for s, p in enumerate(policies)]
    finally:
        stop.set()
        worker.close(RuntimeError("test over"))
    assert sum(p.truncated for p in policies) == 0  # no reply was cut at an undecodable id
    packed, routing = limited.pack([GroupRecord(0, "t", 0, eps)])
    m = packed.loss_mask > 0
    assert m.sum() == sum(e.episode.num_trainable for e in eps) > 0
    assert packed.tokens[m].max() < limit
    logp = limited.token_logprobs(packed, slice(0, 4), routing)
    np.testing.assert_allclose(logp[m], packed.behav_logprobs[m], atol=ROLLOUT_VS_TRAINER_LOGP_ATOL)
    logp_free = free.token_logprobs(packed, slice(0, 4), routing)
    assert np.abs(logp_free[m] - packed.behav_logprobs[m]).min() > 0.05  # the padded ids hold real mass at init


@pytest.mark.slow  # 1–4 min on the shared 2-core machine (two micro models compile: drafting engine, trainer)
def test_drafting_rollouts_record_the_same_law_and_the_trainer_redistills_the_mtp_heads():
    """Rollouts with MTP drafts (RolloutConfig.num_draft): every reply token's μ and routing, drafted-and-accepted or
    not, match the trainer's recomputation under router replay; the worker counts drafted and accepted tokens. The
    RL update's self-distillation term (PolicyLossConfig.mtp_distill_weight) moves the MTP depths only: with equal
    rewards (zero advantages) the trunk keeps its weights, the MTP block's change, and the KL is reported."""
    cfg = micro_model_config(num_mtp_layers=1)
    oc = OptimConfig(lr=1e-3, schedule="constant", warmup_steps=0, weight_decay=0.0, clip_norm=0.0)
    tr = Trainer(cfg, oc, TrainerConfig(rows=4, seq_len=96), dataclasses.replace(RL_LOSS, mtp_distill_weight=1.0),
                 seed=3)
    store = WeightStore()
    store.publish(tr.weights())
    worker = RolloutWorker(cfg, store, dataclasses.replace(RC, num_draft=1), stop_id=TOK.special_id(tk.IM_END))
    assert worker.rc.engine_config().num_draft == 1
    stop = threading.Event()
    worker.start(stop)
    try:
        eps = [two_turn_episode(RolloutPolicy(worker.generate, TOK.vocab_size), s, 1.0, cfg) for s in range(3)]
    finally:
        stop.set()
        worker.close(RuntimeError("test over"))
    counts = worker.counters.snapshot()
    assert counts["rollout_drafted"] > 0 and 0 <= counts.get("rollout_accepted", 0) <= counts["rollout_drafted"]
    packed, routing = tr.pack([GroupRecord(0, "t", 0, eps)])
    m = packed.loss_mask > 0
    logp = tr.token_logprobs(packed, slice(0, 4), routing)
    np.testing.assert_allclose(logp[m], packed.behav_logprobs[m], atol=ROLLOUT_VS_TRAINER_LOGP_ATOL)
    before = jax.device_get(tr.state.params)
    metrics = tr.train([GroupRecord(0, "t", 0, eps)])
    after = jax.device_get(tr.state.params)
    assert metrics["mtp_distill_kl"] > 0 and 0 < metrics["mtp_alpha"] < 1, metrics
    moved = lambda tree_a, tree_b: any(not np.array_equal(a, b)  # noqa: E731
                                       for a, b in zip(jax.tree.leaves(tree_a), jax.tree.leaves(tree_b)))
    assert moved(before["mtp"], after["mtp"])
    assert not moved({k: v for k, v in before.items() if k != "mtp"}, {k: v for k, v in after.items() if k != "mtp"})


def test_policy_gradient_raises_the_better_rollout_and_publishes_versions(trainer, rollout):
    policy = RolloutPolicy(rollout.generate)
    good, bad = two_turn_episode(policy, 10, 1.0), two_turn_episode(policy, 11, 0.0)
    group = GroupRecord(0, "t", 0, [good, bad])
    before = jax.device_get(trainer.state.params)
    v0 = trainer.version

    def seq_logp(rec):
        packed, routing = trainer.pack([GroupRecord(0, "t", 0, [rec, rec])])
        lp = trainer.token_logprobs(packed, slice(0, 4), routing)
        return float(lp[0][packed.loss_mask[0] > 0].sum())

    g0, b0 = seq_logp(good), seq_logp(bad)
    metrics = [trainer.train([group]) for _ in range(3)]
    assert trainer.version == v0 + 3 and [m["version"] for m in metrics] == [v0 + 1, v0 + 2, v0 + 3]
    assert seq_logp(good) > g0 + 0.5 and seq_logp(bad) < b0 - 0.5
    assert metrics[0]["behav_ratio_mean"] == pytest.approx(1.0, abs=1e-3)  # μ = π_prox on the first version
    assert metrics[1]["staleness_max"] == 1.0 and metrics[1]["kl_old_k3"] >= 0  # the same samples, one version on
    assert 0.0 <= metrics[0]["weights/identical_frac"] < 0.5 and metrics[0]["weights/xor_zlib_bytes"] > 0
    assert all(m["finite"] for m in metrics)
    after = jax.device_get(trainer.state.params)
    assert any(not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(after)))


@pytest.mark.parametrize("mtp_depths", [0, 1])
def test_the_first_update_takes_pi_prox_from_its_own_forward(rollout, mtp_depths):
    """A version's first update runs at π_prox's weights, so it reads π_prox off its own forward (old_logp=None)
    instead of a separate log-prob pass: the same loss, metrics and new weights as with the pass, with and without
    MTP self-distillation. Rows=2 splits the batch into two updates: the second still needs (and gets) the pass."""
    policy = RolloutPolicy(rollout.generate)
    group = GroupRecord(0, "t", 0, [two_turn_episode(policy, s, float(s % 2)) for s in range(20, 28)])
    cfg = micro_model_config(num_mtp_layers=mtp_depths)
    # ε = 1 and lr = 1: Adam's first step is g / (|g| + 1) ≈ g, so the new weights compare the two paths' gradients.
    # At the usual ε = 1e-8 the first step is ≈ lr · sign(g), and a gradient within rounding of 0 can flip its sign.
    oc = OptimConfig(lr=1.0, eps=1.0, schedule="constant", warmup_steps=0, weight_decay=0.0, clip_norm=0.0)
    loss = dataclasses.replace(RL_LOSS, mtp_distill_weight=1.0 if mtp_depths else 0.0)
    tr = Trainer(cfg, oc, TrainerConfig(rows=2, seq_len=96), loss, seed=5)
    packed, routing = tr.pack([group])
    batch, route = tr.device_batch(packed, slice(0, 2), None if routing is None else routing[:, 0:2])
    old = tr._logp(tr.state.params, tr.state.router_state, batch, route)
    with_pass, m_pass = tr._update(tr.state, batch, route, old, None)
    fused, m_fused = tr._update(tr.state, batch, route, None, None)
    for k in ("loss", "pg_loss", "grad_norm", "ratio_mean", "clip_frac"):
        if k in m_pass:
            np.testing.assert_allclose(m_fused[k], m_pass[k], **FP32_FN, err_msg=k)
    for a, b in zip(jax.tree.leaves(with_pass.params), jax.tree.leaves(fused.params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), **FP32_FN)
    metrics = tr.train([group])
    assert metrics["updates"] == 2 and metrics["finite"] == 1.0


def test_kl_to_the_warm_start_is_zero_at_first_and_in_the_loss(rollout):
    """kl_coef > 0: π_ref = the weights the trainer started from; k3(π_θ‖π_ref) is 0 on the first update and
    positive once the policy moved, and the loss is pg_loss + β·kl_loss."""
    oc = OptimConfig(lr=3e-2, schedule="constant", warmup_steps=0, weight_decay=0.0, clip_norm=0.0)
    loss = PolicyLossConfig(kl_coef=0.5, aggregation="constant")
    kl_trainer = Trainer(CFG, oc, TrainerConfig(rows=4, seq_len=96), loss, seed=1)
    kl_trainer.load_params(kl_trainer.state.params, kl_trainer.state.router_state)  # the warm start = π_ref
    policy = RolloutPolicy(rollout.generate)
    group = GroupRecord(0, "t", 0, [two_turn_episode(policy, 20, 1.0), two_turn_episode(policy, 21, 0.0)])
    metrics = [kl_trainer.train([group]) for _ in range(3)]
    assert metrics[0]["kl_ref_k3"] == pytest.approx(0.0, abs=1e-7)
    assert metrics[0]["kl_loss"] == pytest.approx(0.0, abs=1e-7)
    assert metrics[2]["kl_ref_k3"] > 1e-4 and metrics[2]["kl_loss"] > 0
    for m in metrics:
        assert m["loss"] == pytest.approx(m["pg_loss"] + 0.5 * m["kl_loss"], rel=1e-5, abs=1e-7)


def test_episodes_pick_up_new_weights_between_turns(trainer, rollout):
    """A partial rollout: turn 1 on the current version, a publication, turn 2 on the next one."""
    store = rollout.store
    policy = RolloutPolicy(rollout.generate)
    rng = np.random.default_rng(0)
    b = SegmentBuilder(rng.integers(0, 256, 5).tolist(), rng.integers(0, 256, 9).tolist(), [1, 2], 256)
    c1 = policy.generate(b.context, 12)
    b.append(c1.ids, True, c1.logprobs, policy_version=c1.policy_version)
    store.publish(Weights(store.version + 1, trainer.state.params, trainer.state.router_state))  # lands mid-episode
    b.append(rng.integers(0, 256, 6).tolist(), False)
    c2 = policy.generate(b.context, 12)
    b.append(c2.ids, True, c2.logprobs, policy_version=c2.policy_version)
    ep = b.finish(reward=1.0)
    versions = [t.policy_version for t in ep.turns if t.trainable]
    assert versions == [c1.policy_version, store.version] and versions[1] == versions[0] + 1
    assert ep.min_policy_version == versions[0]


@needs_sandbox
def test_run_rl_trains_checkpoints_and_resumes(tmp_path):
    from experiments import rl as rl_exp

    c = rl_exp.get_config("toy")
    c.model = schema.to_config_dict(micro_model_config())
    c.rollout.num_draft = 0  # the micro model has no MTP depths to draft with
    c.workdir, c.init_from = str(tmp_path / "rl"), ""
    c.rl.update(steps=2, groups_per_batch=2, samples=2, eval_every=2, eval_tasks=4, eval_samples=1,
                episode_threads=8, train_tasks=40, plot=True)
    c.rl.loop.update(episode_threads=8)
    c.rollout.update(batch_size=4, prompt_len=192, max_new_tokens=24)
    c.harness.update(max_new_tokens=24, summary_tokens=16, max_turns=2, context_budget=144)
    c.trainer.update(rows=4, seq_len=256)
    c.checkpoint.every = 1
    r1 = orchestrator.run_rl(c)
    assert r1.final_version == 2 and len(r1.history) == 2
    assert [e["eval/version"] for e in r1.evals] == [0.0, 2.0] and r1.evals[0]["eval/episodes"] == 4
    assert all(m["staleness_max"] <= c.rl.eta for m in r1.history)
    assert (tmp_path / "rl" / "curves.png").stat().st_size > 10_000
    lines = (tmp_path / "rl" / "logs" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 4  # two versions + two evaluations
    c.rl.steps = 3
    r2 = orchestrator.run_rl(c)
    assert r2.final_version == 3 and len(r2.history) == 1  # resumed at version 2, trained one more
    # Counters carry across the resume: r2 starts from those saved with version 2 (episodes still finishing after
    # that save are counted in r1 only) and adds at least one more batch of groups.
    start = r2.start_counters["episodes_done"]
    assert r1.history[-1]["count/episodes_done"] <= start <= r1.counters["episodes_done"]
    assert r2.counters["episodes_done"] >= start + c.rl.groups_per_batch * c.rl.samples


@needs_sandbox
def test_a_summarizing_episode_trains_both_segments_with_the_episodes_advantage(tmp_path):
    """rollout → env worker (harness summarises past its context budget) → trainer: both segments of the episode
    carry its advantage on every trained token, the summary included, and the update moves both."""
    from composer2_jax.env import Environment, SandboxLimits
    from composer2_jax.env.harness import HarnessConfig
    from composer2_jax.rl import tasks
    from composer2_jax.rl.advantages import group_advantages
    from composer2_jax.rl.records import summarize_groups
    from composer2_jax.rl.rewards import RewardConfig
    from composer2_jax.rl.services.env_worker import EnvWorker
    from composer2_jax.rl.services.testing import ScriptedRollout

    oc = OptimConfig(lr=3e-2, schedule="constant", warmup_steps=0, weight_decay=0.0, clip_norm=0.0)
    tr = Trainer(CFG, oc, TrainerConfig(rows=2, seq_len=512, router_replay=False), seed=3)
    store = WeightStore(tr.weights())
    rollout = ScriptedRollout(store, p_correct=1.0)
    harness = HarnessConfig(max_turns=2, max_new_tokens=192, max_total_tokens=1024, context_budget=200,
                            summary_tokens=64, system_prompt="Fix the bug.", summary_prompt="Summarize your progress.")
    with Environment(pool_size=2, limits=SandboxLimits(timeout_s=30)) as env:
        worker = EnvWorker(env, TOK, harness, RewardConfig(penalty_coef=1e-3), ("read_file", "edit_file", "submit"),
                           schemas_in_prompt=False, repo_root=tmp_path)
        # hard: read (the file overflows the budget) → summary → a fresh context; easy: fixed in one reply
        summarizing = worker.run(tasks.make_task(5, 2), RolloutPolicy(rollout.generate), admitted_version=0)
        solved = worker.run(tasks.make_task(11, 0), RolloutPolicy(rollout.generate), admitted_version=0)
    assert summarizing.summaries >= 1 and summarizing.summary_tokens > 0 and solved.summaries == 0
    assert len(summarizing.episode.segments) == summarizing.summaries + 1 and solved.success == 1.0
    group = GroupRecord(0, "t", 0, [summarizing, solved])
    stats = summarize_groups([group])
    assert stats["summary_fraction"] == 0.5 and stats["summary_tokens"] == summarizing.summary_tokens / 2
    adv = group_advantages([group])[0]
    assert adv < 0
    packed, _ = tr.pack([group])
    n_seg = len(summarizing.episode.segments)  # items 0..n_seg-1 are its segments, in order
    seg_rows = [(p.row, p.start, p.length) for p in sorted(packed.placements, key=lambda p: p.item) if p.item < n_seg]
    for (row, start, length), seg in zip(seg_rows, summarizing.episode.segments):
        mask = packed.loss_mask[row, start:start + length] > 0
        assert mask.sum() == seg.num_trainable > 0
        np.testing.assert_array_equal(packed.advantages[row, start:start + length][mask], np.float32(adv))
    assert "summary" in summarizing.episode.segments[0].roles()

    def seg_logp():
        lp = tr.token_logprobs(packed, slice(0, packed.tokens.shape[0]))
        return [float(lp[r, s:s + n][packed.loss_mask[r, s:s + n] > 0].sum()) for r, s, n in seg_rows]

    before = seg_logp()
    for _ in range(3):
        tr.train([group])
    after = seg_logp()
    assert all(a < b - 0.5 for a, b in zip(after, before)), (before, after)  # a negative advantage, both segments


def test_tree_groups_replay_each_leafs_inherited_routing(trainer, rollout):
    """A branch resumed after turn 1 inherits its parent's first call: packing the tree's leaf paths with those
    routing records, the trainer's π_θ equals the sampler's μ on every trained token (shared prefix trained once)."""
    from composer2_jax.rl.tree import GroupTree, TreeNode

    rng = np.random.default_rng(7)
    b = SegmentBuilder(rng.integers(0, 256, 5).tolist(), rng.integers(0, 256, 9).tolist(), [1, 2], 256)
    parent = RolloutPolicy(rollout.generate)
    c1 = parent.generate(b.context, 12)
    b.append(c1.ids, True, c1.logprobs, policy_version=c1.policy_version)
    b.append(rng.integers(0, 256, 6).tolist(), False)
    boundary = b.fork()  # the checkpoint after turn 1
    leaves = []
    for k, builder in enumerate([b, boundary.fork(), boundary.fork()]):
        policy = RolloutPolicy(rollout.generate)
        c = policy.generate(builder.context, 12)
        builder.append(c.ids, True, c.logprobs, policy_version=c.policy_version)
        ep = builder.finish(reward=float(k == 1))
        calls = parent.calls[:1] + policy.calls  # every leaf inherits the first call (leaf 0 is the parent's own)
        routing = episode_routing(ep, calls, 1, CFG.num_experts_per_tok)
        leaves.append(EpisodeRecord(ep, routing, "t", "easy", ep.reward, ep.reward, 0.0, {}, "submitted", 2, 0, 0,
                                    24, 0.0, 0.0, 0))
    turns = leaves[0].episode.segments[0].turns
    nodes = [TreeNode("root", None, turns[:2]), TreeNode("t1", "root", turns[2:4])]
    nodes += [TreeNode(f"leaf{k}", "t1", e.episode.segments[0].turns[4:], reward=e.reward)
              for k, e in enumerate(leaves)]
    group = GroupRecord(0, "t", 0, leaves, tree=GroupTree(nodes))
    packed, routing = trainer.pack([group])
    m = packed.loss_mask > 0
    assert m.sum() == len(c1.ids) + sum(len(e.episode.segments[0].turns[4].tokens) for e in leaves)
    logp = trainer.token_logprobs(packed, slice(0, 4), routing)
    np.testing.assert_allclose(logp[m], packed.behav_logprobs[m], atol=ROLLOUT_VS_TRAINER_LOGP_ATOL)
    adv = packed.advantages[m]
    np.testing.assert_allclose(np.unique(adv), [-1 / 3, 0.0, 2 / 3], **FP32_FN)  # turn 1: V(t1) − V(root) = 0


@needs_sandbox
@pytest.mark.slow
def test_run_rl_trains_on_tree_groups(tmp_path):
    from experiments import rl as rl_exp

    c = rl_exp.get_config("toy")
    c.model = schema.to_config_dict(micro_model_config())
    c.rollout.num_draft = 0  # the micro model has no MTP depths to draft with
    c.workdir, c.init_from = str(tmp_path / "rl"), ""
    c.rl.update(steps=2, groups_per_batch=2, eval_every=0, eval_tasks=2, eval_samples=1, episode_threads=8,
                train_tasks=40, plot=False, group_mode="tree")
    c.rl.tree.update(initial=2, branches=2, token_budget=96, node_choice="uniform")
    c.rl.loop.update(episode_threads=8)
    c.rollout.update(batch_size=4, prompt_len=192, max_new_tokens=24)
    c.harness.update(max_new_tokens=24, summary_tokens=16, max_turns=2, context_budget=144, max_summaries=0)
    c.trainer.update(rows=4, seq_len=256)
    r = orchestrator.run_rl(c)
    assert r.final_version == 2 and all(m["staleness_max"] <= c.rl.eta for m in r.history)
    assert r.counters["tree_branches"] >= 2 * 2 and r.counters["tree_generated_tokens"] >= 2 * 2 * 96
    first = r.history[0]  # sampled and trained by version 0: π_prox = μ under router replay
    assert first["batch/episodes"] >= 2 * 4
    np.testing.assert_allclose(np.log([first["behav_ratio_min"], first["behav_ratio_max"]]), 0.0,
                               atol=ROLLOUT_VS_TRAINER_LOGP_ATOL)


@needs_sandbox
@pytest.mark.slow
def test_the_trainer_steps_on_branched_tree_groups(tmp_path):
    """Scripted replies (read, then fix) on the toy family's hard tasks make real mid-episode branches; the real
    trainer packs the trees (every sampled token once, per-token edge advantages) and takes a finite step."""
    from composer2_jax.env import Environment, SandboxLimits
    from composer2_jax.env.harness import HarnessConfig
    from composer2_jax.rl import tasks
    from composer2_jax.rl.branching import TreeConfig
    from composer2_jax.rl.curriculum import TaskCurriculum
    from composer2_jax.rl.records import Counters
    from composer2_jax.rl.rewards import RewardConfig
    from composer2_jax.rl.run_config import LoopConfig, RLConfig
    from composer2_jax.rl.services.env_worker import EnvWorker
    from composer2_jax.rl.services.local import LocalOrchestrator
    from composer2_jax.rl.services.testing import ScriptedRollout

    harness = HarnessConfig(max_turns=4, max_new_tokens=192, max_total_tokens=1024, context_budget=2048,
                            system_prompt="Fix the bug.")
    hard = [t for t in tasks.task_set(60, 0) if "should return" in t.instruction][:4]
    oc = OptimConfig(lr=1e-3, schedule="constant", warmup_steps=0, weight_decay=0.0, clip_norm=0.0)
    trainer = Trainer(CFG, oc, TrainerConfig(rows=4, seq_len=2048), seed=0)
    consumed = []
    train = trainer.train
    trainer.train = lambda groups: (consumed.append(groups), train(groups))[1]
    with Environment(pool_size=4, limits=SandboxLimits(timeout_s=30)) as env:
        store, counters = WeightStore(), Counters()
        worker = EnvWorker(env, TOK, harness, RewardConfig(), ("read_file", "edit_file", "submit"),
                           schemas_in_prompt=False, repo_root=tmp_path)
        rl = RLConfig(eta=0, steps=1, groups_per_batch=1, group_mode="tree",
                      tree=TreeConfig(initial=2, branches=2, token_budget=500, node_choice="uniform"),
                      loop=LoopConfig(episode_threads=4, max_retries=1, take_timeout_s=300))
        history = LocalOrchestrator(trainer, ScriptedRollout(store, p_correct=0.5, seed=5), worker,
                                    TaskCurriculum(hard), rl, store, counters).run()
    (group,), = consumed
    assert any(len(kids) > 1 for n, kids in group.tree.children.items() if n != group.tree.root)  # mid-episode
    sampled = sum(len(t.tokens) for n in group.tree.nodes.values() for t in n.turns if t.trainable)
    packed, _ = trainer.pack([group])
    assert packed.loss_mask.sum() == sampled
    m = history[0]
    assert m["version"] == 1 and np.isfinite(m["loss"]) and m["batch/episodes"] == len(group.tree.leaves)
