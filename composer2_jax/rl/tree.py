"""Credit on tree-structured groups: branching rollouts share prefixes, so credit is assigned per edge.

A group tree's nodes are turn boundaries. The root is the task's start (its turns: the prompt); every other node is
reached by the turns sampled from its parent's boundary — the model's reply and the tool observations that followed,
up to the next boundary. Leaves are finished episodes and carry their reward. Branching from a mid-episode snapshot
adds a child to an inner node (Tree-GRPO, Ji et al. 2025; TreeRL, Hou et al. 2025).

  value V(n)        = mean reward of the leaves below n (a leaf: its reward)
  advantage A(p→n)  = V(n) − V(p)                                       (the step's effect on the expected reward)
                    + [group_relative] (V(n) − V(root)) / (std of the leaf rewards + ε)   (Tree-GRPO's group term)

A plain group — the root with G leaf children, one per episode — gets A_i = R_i − mean(R) (Dr. GRPO), plus GRPO's
normalised term when group_relative is on. Shared prefix tokens are trained once: each edge's turns are trained in
the sample of exactly one leaf below it (the first in the nodes' order) with that edge's advantage, and are
context (loss mask 0) in every other leaf's sample. Packing (rl/trajectory.py), behaviour log-probs, policy
versions and router replay read the per-turn fields of the segments built here unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence

import numpy as np

from composer2_jax.episode import Segment, Turn


@dataclasses.dataclass(frozen=True)
class TreeNode:
    """One turn boundary of a group tree."""

    node_id: Hashable
    parent: Hashable | None  # None for the root
    turns: tuple[Turn, ...] = ()  # sampled from the parent's boundary to this one (the root: the prompt)
    reward: float | None = None  # leaves: the finished episode's reward; inner nodes: None


class GroupTree:
    """A validated group tree: one root, every parent present, rewards exactly on the leaves."""

    def __init__(self, nodes: Sequence[TreeNode]):
        self.nodes = {n.node_id: n for n in nodes}
        if len(self.nodes) != len(nodes):
            ids = [n.node_id for n in nodes]
            raise ValueError(f"duplicate node ids {sorted({i for i in ids if ids.count(i) > 1}, key=str)}")
        roots = [n.node_id for n in nodes if n.parent is None]
        if len(roots) != 1:
            raise ValueError(f"a group tree has exactly one root (parent None); got {len(roots)}: {roots}")
        self.root = roots[0]
        self.children: dict[Hashable, list[Hashable]] = {i: [] for i in self.nodes}
        for n in nodes:
            if n.parent is not None:
                if n.parent not in self.nodes:
                    raise ValueError(f"node {n.node_id!r} has parent {n.parent!r}, which is not in the tree")
                self.children[n.parent].append(n.node_id)
        self.order = self._preorder()
        if len(self.order) != len(self.nodes):
            stray = sorted(set(self.nodes) - set(self.order), key=str)
            raise ValueError(f"nodes {stray} are not reachable from the root {self.root!r} (a cycle)")
        for i, n in self.nodes.items():
            leaf = not self.children[i]
            if leaf and n.reward is None:
                raise ValueError(f"leaf {i!r} has no reward; every finished episode needs one")
            if not leaf and n.reward is not None:
                raise ValueError(f"inner node {i!r} has reward {n.reward}; rewards belong to leaves")
        self.leaves = [i for i in self.order if not self.children[i]]

    def _preorder(self) -> list[Hashable]:
        out, stack = [], [self.root]
        while stack:
            i = stack.pop()
            out.append(i)
            stack.extend(reversed(self.children[i]))
        return out

    def path(self, node_id: Hashable) -> list[Hashable]:
        """Node ids from the root to `node_id`."""
        out = [node_id]
        while self.nodes[out[-1]].parent is not None:
            out.append(self.nodes[out[-1]].parent)
        return out[::-1]

    def values(self) -> dict[Hashable, float]:
        """V(n): mean reward of the leaves below each node."""
        total: dict[Hashable, float] = {}
        count: dict[Hashable, int] = {}
        for i in reversed(self.order):  # children before parents
            kids = self.children[i]
            total[i] = sum(total[k] for k in kids) if kids else float(self.nodes[i].reward)
            count[i] = sum(count[k] for k in kids) if kids else 1
        return {i: total[i] / count[i] for i in self.nodes}

    def advantages(self, group_relative: bool = False, eps: float = 1e-6) -> dict[Hashable, float]:
        """A(parent → n) for every non-root node n."""
        v = self.values()
        std = float(np.std([self.nodes[i].reward for i in self.leaves]))
        out = {}
        for i in self.order[1:]:
            a = v[i] - v[self.nodes[i].parent]
            if group_relative:
                a += (v[i] - v[self.root]) / (std + eps)
            out[i] = a
        return out

    def owners(self) -> dict[Hashable, Hashable]:
        """The leaf whose sample trains each non-root edge: the first leaf below it in the nodes' order."""
        out = {}
        for leaf in self.leaves:
            for i in self.path(leaf)[1:]:
                out.setdefault(i, leaf)
        return out

    def training_items(self, group_relative: bool = False, eps: float = 1e-6) -> list[tuple[Segment, np.ndarray]]:
        """One (segment, per-token advantage [L]) per leaf, for `pack_segments`: the leaf's whole path as context,
        trained only on the edges it owns, each with its edge's advantage."""
        adv, owner = self.advantages(group_relative, eps), self.owners()
        items = []
        for leaf in self.leaves:
            turns, token_adv = [], []
            for i in self.path(leaf):
                mine = i != self.root and owner[i] == leaf
                for t in self.nodes[i].turns:
                    t = t if (mine or not t.trainable) else dataclasses.replace(
                        t, trainable=False, logprobs=None, policy_version=-1)
                    turns.append(t)
                    token_adv += [adv[i] if t.trainable else 0.0] * len(t.tokens)
            items.append((Segment(tuple(turns)), np.asarray(token_adv, np.float32)))
        return items
