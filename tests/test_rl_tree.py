"""Credit on tree groups (rl/tree.py): values and advantages against a hand-computed tree, plain groups reduce to
Dr. GRPO / GRPO, every sampled token is trained exactly once with its edge's advantage, bad trees are refused."""

import numpy as np
import pytest

from composer2_jax.episode import Turn
from composer2_jax.rl.advantages import dr_grpo_advantages
from composer2_jax.rl.trajectory import pack_segments
from composer2_jax.rl.tree import GroupTree, TreeNode

PROMPT = (Turn("system", (1, 2), False), Turn("user", (3,), False))


def step(tok: int, n: int = 2, version: int = 0) -> tuple[Turn, ...]:
    """A model reply of n tokens starting at id tok, then a one-token observation."""
    reply = Turn("tool_call", tuple(range(tok, tok + n)), True, tuple(-0.1 * (k + 1) for k in range(n)), version)
    return reply, Turn("tool_output", (tok + 100,), False)


def hand_tree() -> GroupTree:
    #            root
    #          /      \
    #         a        b
    #       /   \       \
    #     a1(1) a2(0)   b1(0)
    return GroupTree([
        TreeNode("root", None, PROMPT),
        TreeNode("a", "root", step(10)),
        TreeNode("b", "root", step(20)),
        TreeNode("a1", "a", step(30, 3), reward=1.0),
        TreeNode("a2", "a", step(40), reward=0.0),
        TreeNode("b1", "b", step(50), reward=0.0),
    ])


def test_values_and_advantages_equal_the_hand_computation():
    tree = hand_tree()
    v = tree.values()
    assert v == pytest.approx(dict(root=1 / 3, a=0.5, b=0.0, a1=1.0, a2=0.0, b1=0.0))
    adv = tree.advantages()
    assert adv == pytest.approx(dict(a=0.5 - 1 / 3, b=-1 / 3, a1=0.5, a2=-0.5, b1=0.0))
    std = np.std([1.0, 0.0, 0.0])
    rel = tree.advantages(group_relative=True, eps=0.0)
    for node in adv:
        assert rel[node] == pytest.approx(adv[node] + (v[node] - 1 / 3) / std)


def test_a_plain_group_reduces_to_dr_grpo_and_grpo():
    rewards = [1.0, 0.0, 0.5, 1.0]
    nodes = [TreeNode("r", None, PROMPT)] + [TreeNode(i, "r", step(10 * i + 10), reward=x)
                                              for i, x in enumerate(rewards)]
    tree = GroupTree(nodes)
    plain = [tree.advantages()[i] for i in range(4)]
    np.testing.assert_allclose(plain, np.asarray(dr_grpo_advantages(np.asarray([rewards]))[0]), rtol=1e-6)
    rel = [tree.advantages(group_relative=True)[i] for i in range(4)]
    r = np.asarray(rewards)
    grpo = (r - r.mean()) / (r.std() + 1e-6)  # GRPO (Shao et al. 2024): population std, by hand
    expect = np.asarray(dr_grpo_advantages(np.asarray([rewards]))[0]) + grpo
    np.testing.assert_allclose(rel, expect, rtol=1e-5)


def test_each_sampled_token_is_trained_once_with_its_edges_advantage():
    tree = hand_tree()
    adv = tree.advantages()
    items = tree.training_items()
    assert len(items) == 3  # one sample per leaf: a1, a2, b1
    trained: dict[int, float] = {}
    for seg, token_adv in items:
        mask = seg.loss_mask()
        assert np.all(token_adv[mask == 0] == 0.0)
        for tok, m, a in zip(seg.tokens(), mask, token_adv):
            if m:
                assert tok not in trained, f"token {tok} trained twice"
                trained[int(tok)] = float(a)
    edge_of = {10: "a", 11: "a", 20: "b", 21: "b", 30: "a1", 31: "a1", 32: "a1", 40: "a2", 41: "a2", 50: "b1",
               51: "b1"}
    assert set(trained) == set(edge_of)
    for tok, a in trained.items():
        assert a == pytest.approx(adv[edge_of[tok]])
    # a2's sample holds a's reply as context (not trained), then its own edge
    seg_a2 = items[1][0]
    assert list(seg_a2.tokens()) == [1, 2, 3, 10, 11, 110, 40, 41, 140]
    assert list(seg_a2.loss_mask()) == [0, 0, 0, 0, 0, 0, 1, 1, 0]
    assert list(seg_a2.policy_versions()) == [-1] * 6 + [0, 0, -1]


def test_tree_samples_pack_with_per_token_advantages():
    items = hand_tree().training_items()
    batch = pack_segments(items, seq_len=16)
    for (seg, token_adv), p in zip(items, batch.placements):
        sl = slice(p.start, p.start + p.length)
        np.testing.assert_array_equal(batch.advantages[p.row, sl], token_adv * seg.loss_mask())
        np.testing.assert_array_equal(batch.tokens[p.row, sl], seg.tokens())
    with pytest.raises(ValueError, match="advantage of shape"):
        pack_segments([(items[0][0], np.zeros(3))], seq_len=16)


@pytest.mark.parametrize("nodes,match", [
    ([TreeNode("r", None), TreeNode("x", None, reward=1.0)], "exactly one root"),
    ([TreeNode("r", None), TreeNode("x", "nope", reward=1.0)], "not in the tree"),
    ([TreeNode("r", None), TreeNode("x", "r")], "has no reward"),
    ([TreeNode("r", None), TreeNode("x", "r", reward=0.0), TreeNode("y", "x", reward=1.0)], "rewards belong"),
    ([TreeNode("r", None), TreeNode("r", None)], "duplicate node ids"),
    ([TreeNode("r", None), TreeNode("x", "y", reward=1.0), TreeNode("y", "x", reward=1.0)], "not reachable"),
])
def test_malformed_trees_are_refused_naming_the_node(nodes, match):
    with pytest.raises(ValueError, match=match):
        GroupTree(nodes)
