"""Branching rollouts: a group is a tree of episodes grown from mid-episode checkpoints (issue 18).

    1. M episodes from the task's start, each checkpointed at every turn boundary (env/harness.py, `checkpoints`);
    2. until the group's generated tokens reach its budget: a node-choice rule picks a turn boundary of the tree and
       `branches` continuations are sampled from it, concurrently (each a fork of the boundary's snapshot with the
       harness state restored: `harness.fork_checkpoint` + `harness.resume_episode`);
    3. the episodes become an `rl.tree.GroupTree` whose nodes are the turn boundaries and whose leaves are the
       finished episodes with their rewards; the trainer packs `GroupTree.training_items`.

Node choice (`NODE_CHOICE`, pluggable: any `(Frontier, np.random.Generator) -> node id`):
  uniform         every turn boundary of the tree (the task's start included) equally likely;
  first_failure   the last boundary before a leaf's first failure signal (an error observation, a malformed call,
                  a command that exited non-zero: `ToolCallRecord.failed`), over the leaves that have one; uniform
                  when no leaf failed (Tree-GRPO / the seed's "return to the last good state");
  entropy         the boundary whose next action had the highest policy entropy, estimated per token by the mean
                  −log μ of the replies sampled there (E[−log μ] is the entropy); boundaries not yet branched from
                  first (ARPO, Dong et al. 2025: branch after high-uncertainty steps).

Tree groups need single-segment episodes (a self-summary restarts the context, which a tree path cannot express):
an episode that summarised is a clear error; give the harness a context budget that holds a whole episode.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from composer2_jax.env.harness import EpisodeResult, TurnCheckpoint
from composer2_jax.episode import Turn
from composer2_jax.rl.tree import GroupTree, TreeNode

ROOT = "root"  # the task's start; every other node id is (branch index, turn) or (branch index, "end") for leaves


@dataclasses.dataclass(frozen=True)
class TreeConfig:
    """How a tree group grows."""

    initial: int = 2  # M: episodes from the task's start
    branches: int = 2  # continuations sampled from each chosen boundary (run concurrently)
    token_budget: int = 4096  # the group's generated tokens (every branch's new tokens) before it stops growing
    node_choice: str = "uniform"  # a key of NODE_CHOICE
    group_relative: bool = False  # add Tree-GRPO's group-relative term to the edge advantages (rl/tree.py)

    def __post_init__(self):
        if min(self.initial, self.branches, self.token_budget) < 1:
            raise ValueError(f"TreeConfig(initial={self.initial}, branches={self.branches}, token_budget="
                             f"{self.token_budget}); expected each >= 1")
        if self.node_choice not in NODE_CHOICE:
            raise ValueError(f"TreeConfig.node_choice={self.node_choice!r}; expected one of {sorted(NODE_CHOICE)}")


@dataclasses.dataclass(frozen=True)
class Branch:
    """One finished, rewarded episode of a tree group and the boundary it was resumed from."""

    result: EpisodeResult  # the whole episode (the inherited prefix included) and its checkpoints
    reward: float
    start: Hashable = ROOT  # the node it continued from (ROOT: a fresh episode)
    payload: Any = None  # the caller's record of it (e.g. the EpisodeRecord)


@dataclasses.dataclass(frozen=True)
class TreeGroup:
    """A grown tree group: the tree, the branch of each leaf (in `tree.leaves` order) and every checkpoint."""

    tree: GroupTree
    branches: list[Branch]  # one per leaf, in tree.leaves order
    checkpoints: dict[Hashable, TurnCheckpoint]  # node id -> its checkpoint (the caller deletes the snapshots)
    generated_tokens: int  # new tokens over all branches


@dataclasses.dataclass(frozen=True)
class Frontier:
    """What a node-choice rule sees: the tree so far, its turn boundaries and each leaf's failure boundary."""

    tree: GroupTree
    boundaries: list[Hashable]  # ROOT and every checkpointed node, in tree order
    turn: dict[Hashable, int]  # node id -> its turn (ROOT: 0)
    first_failure: dict[Hashable, Hashable | None]  # leaf -> the boundary before its first failure signal, or None
    visits: dict[Hashable, int]  # node id -> times it was chosen so far


def assemble(branches: Sequence[Branch]) -> tuple[GroupTree, dict[Hashable, TurnCheckpoint], dict[Hashable, int]]:
    """The group tree of some branches (each resumed from ROOT or a node of an earlier one): (tree, checkpoint of
    each inner node, index of the branch of each leaf)."""
    prompt = _turns(branches[0].result)[:2]
    nodes = [TreeNode(ROOT, None, prompt)]
    ckpts: dict[Hashable, TurnCheckpoint] = {}
    leaf_branch: dict[Hashable, int] = {}
    for b, br in enumerate(branches):
        if br.result.summaries:
            raise ValueError(f"branch {b} summarised its context {br.result.summaries} time(s); tree groups need "
                             "single-segment episodes (raise the harness's context_budget)")
        turns = _turns(br.result)
        if br.start != ROOT and br.start not in ckpts:
            raise ValueError(f"branch {b} starts at {br.start!r}, which is no checkpoint of an earlier branch")
        parent = br.start
        done = len(prompt) if parent == ROOT else len(ckpts[parent].builder.current_turns)
        expect = prompt if parent == ROOT else ckpts[parent].builder.current_turns
        if tuple(turns[:done]) != tuple(expect):
            raise ValueError(f"branch {b} does not start with the context of its start node {parent!r}")
        for ckpt in br.result.checkpoints:
            node, upto = (b, ckpt.turn), len(ckpt.builder.current_turns)
            nodes.append(TreeNode(node, parent, tuple(turns[done:upto])))
            ckpts[node], parent, done = ckpt, node, upto
        leaf = (b, "end")
        nodes.append(TreeNode(leaf, parent, tuple(turns[done:]), reward=float(br.reward)))
        leaf_branch[leaf] = b
    return GroupTree(nodes), ckpts, leaf_branch


def _turns(result: EpisodeResult) -> tuple[Turn, ...]:
    """The turns of a single-segment episode (the finished segment, or the prompt if the model produced nothing)."""
    segs = result.episode.segments
    if segs:
        return segs[0].turns
    return tuple(result.checkpoints[-1].builder.current_turns) if result.checkpoints else ()


def frontier(tree: GroupTree, ckpts: dict[Hashable, TurnCheckpoint], branches: Sequence[Branch],
             leaf_branch: dict[Hashable, int], visits: dict[Hashable, int]) -> Frontier:
    """The node-choice view of a tree."""
    turn = {ROOT: 0, **{n: c.turn for n, c in ckpts.items()}}
    boundaries = [n for n in tree.order if n in turn]
    first_failure = {}
    for leaf in tree.leaves:
        calls = branches[leaf_branch[leaf]].result.tool_calls
        failed = next((c.turn for c in calls if c.failed), None)
        path = [n for n in tree.path(leaf) if n in turn]
        first_failure[leaf] = None if failed is None else next(n for n in reversed(path) if turn[n] <= failed - 1)
    return Frontier(tree, boundaries, turn, first_failure, dict(visits))


def choose_uniform(f: Frontier, rng: np.random.Generator) -> Hashable:
    """Any turn boundary, equally likely."""
    return f.boundaries[int(rng.integers(len(f.boundaries)))]


def choose_first_failure(f: Frontier, rng: np.random.Generator) -> Hashable:
    """The boundary before a failing leaf's first failure (a failing leaf drawn uniformly); uniform if none failed."""
    points = [n for n in f.first_failure.values() if n is not None]
    if not points:
        return choose_uniform(f, rng)
    return points[int(rng.integers(len(points)))]


def next_action_entropy(f: Frontier, node: Hashable) -> float:
    """Mean −log μ per token over the replies sampled right after `node` (its children's trained turns)."""
    lps = [-lp for kid in f.tree.children[node] for t in f.tree.nodes[kid].turns if t.trainable
           for lp in t.logprobs]
    return float(np.mean(lps)) if lps else 0.0


def choose_entropy(f: Frontier, rng: np.random.Generator) -> Hashable:
    """The boundary with the highest next-action entropy, among those branched from least often."""
    least = min(f.visits.get(n, 0) for n in f.boundaries)
    fresh = [n for n in f.boundaries if f.visits.get(n, 0) == least]
    return max(fresh, key=lambda n: next_action_entropy(f, n))


NODE_CHOICE: dict[str, Callable[[Frontier, np.random.Generator], Hashable]] = {
    "uniform": choose_uniform, "first_failure": choose_first_failure, "entropy": choose_entropy}


def grow_tree(run: Callable[[TurnCheckpoint | None], Branch], config: TreeConfig, rng: np.random.Generator,
              pool: ThreadPoolExecutor | None = None) -> TreeGroup:
    """Grow one tree group (see the module docstring).

    `run(checkpoint)` runs, grades and rewards one episode with checkpoints on: from the task's start when
    checkpoint is None, else resumed from it; it returns a Branch (start is set here). Episodes of one round run
    on `pool` when given (concurrently with everything else the pool runs), else one after another.
    """
    choose = NODE_CHOICE[config.node_choice]
    branches: list[Branch] = []
    visits: dict[Hashable, int] = {}
    spent = 0

    def round_(start: Hashable, ckpt: TurnCheckpoint | None, n: int) -> None:
        nonlocal spent
        if pool is None:
            results = [run(ckpt) for _ in range(n)]
        else:
            futures = [pool.submit(run, ckpt) for _ in range(n)]
            wait(futures)  # all of them, even when one failed: the caller cleans up after the finished ones
            results = [f.result() for f in futures]
        for br in results:
            inherited = 0 if ckpt is None else ckpt.generated_tokens
            spent += br.result.generated_tokens - inherited
            branches.append(dataclasses.replace(br, start=start))

    round_(ROOT, None, config.initial)
    tree, ckpts, leaf_branch = assemble(branches)
    while spent < config.token_budget:
        node = choose(frontier(tree, ckpts, branches, leaf_branch, visits), rng)
        visits[node] = visits.get(node, 0) + 1
        before = spent
        round_(node, None if node == ROOT else ckpts[node], config.branches)
        tree, ckpts, leaf_branch = assemble(branches)
        if spent == before:  # the policy produced nothing (e.g. every context overflowed): growing cannot progress
            break
    ordered = [branches[leaf_branch[leaf]] for leaf in tree.leaves]
    return TreeGroup(tree, ordered, ckpts, spent)
