"""Trajectories: turns, masks, self-summarised segments, and first-fit packing into [B, T] trainer arrays."""

import jax.numpy as jnp
import numpy as np
import pytest

from composer2_jax import episode as episode_lib
from composer2_jax.losses.rl import PolicyLossConfig, policy_loss
from composer2_jax.rl import advantages as adv_lib
from composer2_jax.rl import trajectory as tj
from tests.tolerances import FP32_FN


def single_segment_episode():
    b = episode_lib.SegmentBuilder([1, 2], [3], summary_prompt_tokens=[90], context_budget=100)
    b.append([10, 11], True, [-0.1, -0.2], role="thinking", policy_version=3)
    b.append([20, 21, 22], False, role="tool_output")
    b.append([12], True, [-0.3], role="message", policy_version=4)
    return b.finish(reward=1.0, group_id="task-1", task_id="task-1")


def test_single_segment_arrays():
    ep = single_segment_episode()
    (seg,) = ep.segments
    np.testing.assert_array_equal(seg.tokens(), [1, 2, 3, 10, 11, 20, 21, 22, 12])
    np.testing.assert_array_equal(seg.loss_mask(), [0, 0, 0, 1, 1, 0, 0, 0, 1])
    np.testing.assert_allclose(seg.behav_logprobs(), [0, 0, 0, -0.1, -0.2, 0, 0, 0, -0.3], **FP32_FN)
    np.testing.assert_array_equal(seg.policy_versions(), [-1, -1, -1, 3, 3, -1, -1, -1, 4])
    assert seg.roles()[:4] == ["system", "system", "user", "thinking"]
    assert (len(seg), seg.num_trainable, ep.num_trainable, ep.min_policy_version) == (9, 3, 3, 3)
    assert ep.reward == 1.0 and ep.group_id == "task-1"
    assert ep.with_reward(0.25).reward == 0.25


def summarized_episode():
    """Budget 12: after 4 thinking + 5 tool-output tokens the context (12) hits the trigger."""
    b = episode_lib.SegmentBuilder([1], [2, 3], summary_prompt_tokens=[90, 91], context_budget=12)
    assert not b.append([10, 10, 10, 10], True, [-0.5] * 4, role="thinking", policy_version=1)
    assert b.append([20] * 5, False, role="tool_output")  # 1 + 2 + 4 + 5 = 12 ≥ 12
    ctx = b.request_summary()
    assert ctx == [1, 2, 3, 10, 10, 10, 10, 20, 20, 20, 20, 20, 90, 91]
    b.add_summary([50, 51, 52], [-1.0, -1.0, -1.0], policy_version=2)
    assert b.context == [1, 2, 3, 50, 51, 52] and not b.needs_summary
    b.append([60, 61], True, [-0.25, -0.75], role="message", policy_version=3)
    return b.finish(reward=0.5, group_id=7)


def test_summarized_episode_segments_and_masks():
    ep = summarized_episode()
    s0, s1 = ep.segments
    np.testing.assert_array_equal(s0.tokens(), [1, 2, 3, 10, 10, 10, 10, 20, 20, 20, 20, 20, 90, 91, 50, 51, 52])
    np.testing.assert_array_equal(s0.loss_mask(), [0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1])
    assert [t.role for t in s0.turns] == ["system", "user", "thinking", "tool_output", "summary_prompt", "summary"]
    # the new context restarts from system + task + summary; the copied summary is context, not trained again
    np.testing.assert_array_equal(s1.tokens(), [1, 2, 3, 50, 51, 52, 60, 61])
    np.testing.assert_array_equal(s1.loss_mask(), [0, 0, 0, 0, 0, 0, 1, 1])
    np.testing.assert_allclose(s1.behav_logprobs(), [0, 0, 0, 0, 0, 0, -0.25, -0.75], **FP32_FN)
    assert s1.roles()[3:6] == ["summary_context"] * 3
    assert ep.num_trainable == 4 + 3 + 2 and ep.min_policy_version == 1


def test_summarized_episode_reward_credits_every_segment_and_the_summary():
    ep = summarized_episode()
    packed = tj.pack_episodes([ep], [0.7], seq_len=32)
    # both segments fit one row of 32 (17 + 8 tokens): segment ids 1 and 2
    assert packed.tokens.shape == (1, 32)
    np.testing.assert_array_equal(packed.segment_ids[0, :25], [1] * 17 + [2] * 8)
    summary_cols = np.arange(14, 17)  # the summary tokens in segment 1
    np.testing.assert_allclose(packed.advantages[0, summary_cols], [0.7] * 3, **FP32_FN)
    np.testing.assert_allclose(packed.advantages[0], 0.7 * packed.loss_mask[0], **FP32_FN)
    assert packed.loss_mask[0].sum() == ep.num_trainable


def test_finish_right_after_a_summary_drops_the_empty_segment():
    b = episode_lib.SegmentBuilder([1], [2], summary_prompt_tokens=[9], context_budget=4)
    b.append([5, 5], True, [-0.1, -0.1], policy_version=0)
    b.request_summary()
    b.add_summary([6], [-0.1], policy_version=0)
    ep = b.finish()
    assert len(ep.segments) == 1 and ep.reward is None


def test_turn_and_builder_errors():
    with pytest.raises(ValueError, match="needs the sampler's per-token logprobs"):
        episode_lib.Turn("message", (1, 2), True, None, 0)
    with pytest.raises(ValueError, match="2 tokens but 1 logprobs"):
        episode_lib.Turn("message", (1, 2), True, (-0.1,), 0)
    with pytest.raises(ValueError, match="unknown role 'assistant'"):
        episode_lib.Turn("assistant", (1,), False)
    with pytest.raises(ValueError, match="needs policy_version ≥ 0"):
        episode_lib.Turn("message", (1,), True, (-0.1,))
    with pytest.raises(ValueError, match="context_budget=4 must exceed"):
        episode_lib.SegmentBuilder([1, 2], [3], [4, 5], context_budget=4)
    with pytest.raises(ValueError, match="system_tokens is empty"):
        episode_lib.SegmentBuilder([], [3], [4], context_budget=10)
    b = episode_lib.SegmentBuilder([1], [2], [9], context_budget=10)
    with pytest.raises(ValueError, match="call request_summary"):
        b.add_summary([6], [-0.1], policy_version=0)
    b.request_summary()
    with pytest.raises(ValueError, match="call add_summary"):
        b.append([5], False)
    with pytest.raises(ValueError, match="call add_summary"):
        b.finish()
    b.add_summary([6], [-0.1], policy_version=0)
    b.finish()
    with pytest.raises(ValueError, match="the episode is finished"):
        b.append([5], False)


# ------------------------------------------------------------------------------------------------------ packing


def make_segment(n, first_token=100, n_train=None):
    """A segment of n tokens: 1 system token, then (n − 1) model tokens (or n_train of them, rest observations)."""
    n_train = n - 1 if n_train is None else n_train
    turns = [episode_lib.Turn("system", (first_token,), False)]
    if n_train:
        turns.append(episode_lib.Turn("message", tuple(range(first_token + 1, first_token + 1 + n_train)), True,
                             tuple(-0.01 * (i + 1) for i in range(n_train)), 5))
    if n - 1 - n_train:
        turns.append(episode_lib.Turn("tool_output", (7,) * (n - 1 - n_train), False))
    return episode_lib.Segment(tuple(turns))


def test_first_fit_by_hand():
    # T = 10, lengths 6, 5, 4, 3: 6 → row 0; 5 → row 1 (6 + 5 > 10); 4 → row 0 (6 + 4 = 10);
    # 3 → row 1 (5 + 3 = 8)
    assert tj.first_fit([6, 5, 4, 3], 10) == [(0, 0), (1, 0), (0, 6), (1, 5)]
    items = [(make_segment(n, 100 * (i + 1)), float(i)) for i, n in enumerate([6, 5, 4, 3])]
    packed = tj.pack_segments(items, seq_len=10)
    assert [(p.row, p.start, p.length) for p in packed.placements] == [(0, 0, 6), (1, 0, 5), (0, 6, 4), (1, 5, 3)]
    np.testing.assert_array_equal(packed.segment_ids, [[1] * 6 + [2] * 4, [1] * 5 + [2] * 3 + [0] * 2])
    np.testing.assert_array_equal(packed.positions[1], [0, 1, 2, 3, 4, 0, 1, 2, 0, 0])


def check_packing_invariants(items, packed, seq_len, pad_id):
    """Each segment sits intact where its placement says; everything else is padding."""
    b, t = packed.tokens.shape
    assert t == seq_len
    covered = np.zeros((b, t), bool)
    for (seg, a), p in zip(items, packed.placements):
        sl = slice(p.start, p.start + p.length)
        assert p.length == len(seg) and not covered[p.row, sl].any()
        covered[p.row, sl] = True
        np.testing.assert_array_equal(packed.tokens[p.row, sl], seg.tokens())
        np.testing.assert_array_equal(packed.loss_mask[p.row, sl], seg.loss_mask())
        np.testing.assert_array_equal(packed.behav_logprobs[p.row, sl], seg.behav_logprobs())
        np.testing.assert_array_equal(packed.policy_versions[p.row, sl], seg.policy_versions())
        np.testing.assert_allclose(packed.advantages[p.row, sl], np.float32(a) * seg.loss_mask(), **FP32_FN)
        np.testing.assert_array_equal(packed.positions[p.row, sl], np.arange(p.length))
        assert len(set(packed.segment_ids[p.row, sl].tolist())) == 1 and packed.segment_ids[p.row, p.start] >= 1
        assert packed.loss_mask[p.row, p.start] == 0  # a segment's first token is never trained on
    for r in range(b):  # ids are 1, 2, … in column order within each row
        ids = [i for i in dict.fromkeys(packed.segment_ids[r].tolist()) if i]
        assert ids == list(range(1, len(ids) + 1))
    pad = ~covered
    assert (packed.tokens[pad] == pad_id).all() and (packed.segment_ids[pad] == 0).all()
    assert (packed.loss_mask[pad] == 0).all() and (packed.advantages[pad] == 0).all()
    assert (packed.positions[pad] == 0).all() and (packed.policy_versions[pad] == -1).all()
    assert packed.loss_mask.sum() == sum(seg.num_trainable for seg, _ in items)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_packing_invariants_random(seed):
    rng = np.random.default_rng(seed)
    items = []
    for i in range(int(rng.integers(5, 20))):
        n = int(rng.integers(2, 33))
        items.append((make_segment(n, 1000 * (i + 1), n_train=int(rng.integers(0, n))), float(rng.normal())))
    packed = tj.pack_segments(items, seq_len=32, pad_id=-7)
    check_packing_invariants(items, packed, 32, -7)
    # first-fit never opens a row while an earlier row had room: every row but the last was too full for
    # some later segment, so the row count is at most the count of an item-per-row packing
    assert packed.tokens.shape[0] <= len(items)
    fill = np.zeros(packed.tokens.shape[0], int)
    for p in packed.placements:
        assert all(fill[r] + p.length > 32 for r in range(p.row))  # no earlier row had room
        fill[p.row] += p.length


def test_packing_batch_size_and_errors():
    items = [(make_segment(6), 1.0), (make_segment(6), -1.0)]
    packed = tj.pack_segments(items, seq_len=8, batch_size=4)
    assert packed.tokens.shape == (4, 8)
    check_packing_invariants(items, packed, 8, 0)
    with pytest.raises(ValueError, match="need 2 rows of T=8, more than batch_size=1"):
        tj.pack_segments(items, seq_len=8, batch_size=1)
    with pytest.raises(ValueError, match="segment 1 has 9 tokens, more than the row length T=8"):
        tj.pack_segments([(make_segment(3), 0.0), (make_segment(9), 0.0)], seq_len=8)
    bad = episode_lib.Segment((episode_lib.Turn("message", (1, 2), True, (-0.1, -0.1), 0),))
    with pytest.raises(ValueError, match="segment 0 starts with a trained token"):
        tj.pack_segments([(bad, 0.0)], seq_len=8)
    with pytest.raises(ValueError, match="2 episodes but 1 advantages"):
        tj.segments_with_advantages([single_segment_episode()] * 2, [0.0])


def test_packed_batch_feeds_advantages_and_policy_loss():
    # Two rollouts of one task: rewards 1 and 0.5 → Dr. GRPO advantages +0.25 / −0.25 on every trained token of
    # every segment. With π_θ = π_prox = μ (ratio 1) the token-mean loss is −Σ m·Â / Σ m.
    eps = [single_segment_episode(), summarized_episode()]
    rewards = jnp.array([ep.reward for ep in eps])
    ids = np.zeros(2, np.int32)  # one group of two
    a = np.asarray(adv_lib.dr_grpo_advantages(rewards, ids, num_groups=1))
    np.testing.assert_allclose(a, [0.25, -0.25], **FP32_FN)
    packed = tj.pack_episodes(eps, a, seq_len=32, batch_size=2)
    check_packing_invariants(tj.segments_with_advantages(eps, a), packed, 32, 0)
    logp = jnp.asarray(packed.behav_logprobs)
    loss, _ = policy_loss(logp, logp, logp, jnp.asarray(packed.advantages), jnp.asarray(packed.loss_mask),
                          PolicyLossConfig(behav_weight="full", aggregation="seq-mean-token-mean"),
                          segment_ids=jnp.asarray(packed.segment_ids))
    # sequences: episode 0 (3 tokens, +0.25), episode 1 segment 0 (7 tokens, −0.25), segment 1 (2 tokens, −0.25):
    # seq-mean of per-sequence means of −Â: (−0.25 + 0.25 + 0.25) / 3
    np.testing.assert_allclose(float(loss), 0.25 / 3, **FP32_FN)
