"""What flows between the services: one graded episode, one group of episodes of a task, and the run's counters."""

from __future__ import annotations

import collections
import dataclasses
import threading
from typing import Any

import numpy as np

from composer2_jax.episode import Episode
from composer2_jax.rl.rewards import MEASURES, TERMS
from composer2_jax.rl.tree import GroupTree


@dataclasses.dataclass
class EpisodeRecord:
    """A finished, graded episode: the trainer's Episode (reward set), per-segment routing, and what to log."""

    episode: Episode  # segments with behaviour log-probs and the policy version of every model turn
    routing: list[np.ndarray | None]  # per segment [L_moe, len(segment), k] int32 recorded experts; None = dense
    task_id: str
    difficulty: str  # "easy" | "hard" (or a benchmark category)
    reward: float
    success: float
    effort: float  # x of the length penalty
    breakdown: dict[str, float]  # reward/… components
    stop_reason: str
    turns: int
    tool_calls: int
    malformed: int
    generated_tokens: int  # tokens this episode sampled itself (a branch: not the prefix it inherited)
    wall_s: float
    grade_s: float
    admitted_version: int  # weight version when the group was admitted (the staleness bound starts here)
    source: str = "toy"  # the task's curriculum entry (rl/sources.py)
    harness: Any = None  # the harness's EpisodeResult when kept (branching rollouts: checkpoints, tool-call records)
    disk: dict | None = None  # its sandbox lineage's layer-store figures (env/budget.py: budget, bytes added)

    @property
    def min_version(self) -> int:
        """Oldest policy version that sampled a trained token (−1 if none was trained)."""
        return self.episode.min_policy_version

    @property
    def summaries(self) -> int:
        """Self-summaries the model wrote in this episode (each restarts the context: a new segment)."""
        return sum(t.role == "summary" for t in self.episode.turns)

    @property
    def summary_tokens(self) -> int:
        """Tokens of those summaries."""
        return sum(len(t.tokens) for t in self.episode.turns if t.role == "summary")

    @property
    def max_version(self) -> int:
        """Newest policy version that sampled a trained token (> min_version: the episode crossed an update)."""
        versions = [t.policy_version for t in self.episode.turns if t.trainable]
        return max(versions) if versions else -1


@dataclasses.dataclass
class GroupRecord:
    """The rollouts of one task that share an advantage baseline (Dr. GRPO group)."""

    group_id: int  # admission index: groups are admitted 0, 1, 2, … (the staleness gate counts them)
    task_id: str
    admitted_version: int
    episodes: list[EpisodeRecord]  # tree groups: one per leaf, in tree.leaves order
    tree: GroupTree | None = None  # branching rollouts: the group's tree (rl/tree.py); None: a plain group
    group_relative: bool = False  # tree groups: add Tree-GRPO's group-relative term to the edge advantages

    @property
    def min_version(self) -> int:
        """Oldest policy version among the group's trained tokens."""
        versions = [e.min_version for e in self.episodes if e.min_version >= 0]
        return min(versions) if versions else self.admitted_version

    @property
    def rewards(self) -> list[float]:
        return [e.reward for e in self.episodes]


class Counters:
    """Thread-safe named counts (episodes run, retried, dropped, stale groups, …) that checkpoints carry."""

    def __init__(self, initial: dict[str, int] | None = None):
        self._c: collections.Counter = collections.Counter(initial or {})
        self._lock = threading.Lock()

    def add(self, name: str, n: int = 1) -> None:
        """counts[name] += n."""
        with self._lock:
            self._c[name] += n

    def get(self, name: str) -> int:
        """The count of one name (0 if never added)."""
        with self._lock:
            return self._c[name]

    def snapshot(self) -> dict[str, int]:
        """A copy of every count."""
        with self._lock:
            return dict(self._c)


def term_stats(episodes: list[EpisodeRecord]) -> dict[str, float]:
    """Per reward term (rl/rewards.py TERMS): its mean signed value `term/NAME` and the fraction of episodes where
    it is non-zero `term_nonzero/NAME` (a term absent from a breakdown counts as 0); per raw measurement behind
    the auxiliary terms (`MEASURES`, whatever the term's weight): its mean `measure/NAME` and the fraction of
    episodes where it is non-zero `measure_nonzero/NAME`."""
    out = {}
    for prefix, names in (("term", TERMS), ("measure", MEASURES)):
        for name in names:
            values = np.asarray([e.breakdown.get(f"reward/{name}", 0.0) for e in episodes], np.float64)
            out[f"{prefix}/{name}"] = float(values.mean())
            out[f"{prefix}_nonzero/{name}"] = float(np.mean(values != 0))
    return out


def useful_samples(group: GroupRecord, eps: float = 1e-9) -> int:
    """Samples of a group that carry a pass/fail learning signal: they train a token whose advantage, computed on
    success (1/0) instead of the reward, is non-zero. A plain group: every sample when the group has both passes
    and fails, else none. A tree group: the leaves that own (train) an edge whose success value differs from its
    parent's (rl/tree.py `owners`). Success, not reward, so that length-penalty differences between equally
    successful samples do not count."""
    if group.tree is None:
        successes = {e.success for e in group.episodes}
        return len(group.episodes) if len(successes) > 1 else 0
    tree = group.tree
    if len(tree.leaves) != len(group.episodes):
        raise ValueError(f"group {group.group_id}: {len(group.episodes)} episodes for {len(tree.leaves)} leaves")
    success = {leaf: float(e.success) for leaf, e in zip(tree.leaves, group.episodes)}
    on_success = GroupTree([dataclasses.replace(tree.nodes[i], reward=success.get(i)) for i in tree.order])
    adv, owner = on_success.advantages(), on_success.owners()
    return len({owner[i] for i, a in adv.items() if abs(a) > eps
                and any(t.trainable for t in tree.nodes[i].turns)})


def summarize_groups(groups: list[GroupRecord]) -> dict[str, Any]:
    """Mean reward, pass rate and effort overall and per difficulty, every reward term (mean and fraction
    non-zero), self-summaries (the fraction of episodes with one, summary tokens per episode), the version
    spread, and the share of useful samples with the tokens spent per useful sample (`useful_samples`), of a
    batch."""
    eps = [e for g in groups for e in g.episodes]
    out: dict[str, Any] = {"episodes": len(eps)}
    if not eps:
        return out
    out.update(reward=float(np.mean([e.reward for e in eps])), pass_rate=float(np.mean([e.success for e in eps])),
               effort=float(np.mean([e.effort for e in eps])), turns=float(np.mean([e.turns for e in eps])),
               generated_tokens=float(np.mean([e.generated_tokens for e in eps])),
               crossed_update=float(np.mean([e.max_version > e.min_version for e in eps])),
               summary_fraction=float(np.mean([e.summaries > 0 for e in eps])),
               summary_tokens=float(np.mean([e.summary_tokens for e in eps])), **term_stats(eps))
    spent, useful = sum(e.generated_tokens for e in eps), sum(useful_samples(g) for g in groups)
    # samples with a pass/fail signal, and the generated tokens (branches: their own only) spent per such sample
    out.update(useful_samples=float(useful), useful_fraction=useful / len(eps), tokens_spent=float(spent))
    if useful:
        out["tokens_per_useful_sample"] = spent / useful
    for diff in sorted({e.difficulty for e in eps}):
        sub = [e for e in eps if e.difficulty == diff]
        out[f"pass_rate/{diff}"] = float(np.mean([e.success for e in sub]))
        out[f"effort/{diff}"] = float(np.mean([e.effort for e in sub]))
        out[f"reward/{diff}"] = float(np.mean([e.reward for e in sub]))
    for source in sorted({e.source for e in eps}):
        sub = [e for e in eps if e.source == source]
        out[f"episodes/source/{source}"] = float(len(sub))
        out[f"pass_rate/source/{source}"] = float(np.mean([e.success for e in sub]))
        out[f"reward/source/{source}"] = float(np.mean([e.reward for e in sub]))
    return out
