"""Multi-turn episodes (turns → segments → episode), self-summarisation, and packing into trainer arrays.

Tokenizer-free: callers pass token id lists. An episode is one or more segments; a segment is one context
window the model saw, a sequence of turns. Past a token budget the model is asked to summarise its work
(a summary prompt is appended, the model writes a summary), and the next segment restarts from
system + task + summary. The episode's single reward credits every segment, the summary tokens included:
all segments of an episode carry the episode's advantage (so summaries that lead to success are reinforced).

Alignment convention of the packed arrays: everything is aligned with `tokens` (not shifted). loss_mask[b, t] = 1
means tokens[b, t] was sampled by the model and behav_logprobs[b, t] = log μ(tokens[b, t] | tokens of its segment
before t). The trainer takes log π_θ(tokens[b, t]) from the logits at t − 1 of the same segment, which exists
because a segment's first token (the system prompt) is never trained on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Sequence

import numpy as np

ROLES = ("system", "user", "thinking", "tool_call", "tool_output", "message", "summary_prompt", "summary",
         "summary_context")
MODEL_ROLES = ("thinking", "tool_call", "message", "summary")  # roles the model generates


@dataclasses.dataclass(frozen=True)
class Turn:
    """A contiguous run of tokens with one role; model turns carry the sampler's per-token log-probs."""

    role: str  # one of ROLES
    tokens: tuple[int, ...]
    trainable: bool  # loss mask 1 on these tokens
    logprobs: tuple[float, ...] | None = None  # log μ per token as sampled; required when trainable
    policy_version: int = -1  # version of the policy that sampled this turn; -1 for non-model tokens

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"unknown role {self.role!r}; expected one of {ROLES}")
        object.__setattr__(self, "tokens", tuple(int(t) for t in self.tokens))
        if self.logprobs is not None:
            object.__setattr__(self, "logprobs", tuple(float(p) for p in self.logprobs))
            if len(self.logprobs) != len(self.tokens):
                raise ValueError(
                    f"{self.role} turn has {len(self.tokens)} tokens but {len(self.logprobs)} logprobs; expected equal"
                )
        if self.trainable and self.logprobs is None:
            raise ValueError(f"trainable {self.role} turn needs the sampler's per-token logprobs; got None")
        if self.trainable and self.policy_version < 0:
            raise ValueError(f"trainable {self.role} turn needs policy_version ≥ 0; got {self.policy_version}")


@dataclasses.dataclass(frozen=True)
class Segment:
    """One context window: the turns the model saw, in order."""

    turns: tuple[Turn, ...]

    def __len__(self) -> int:
        return sum(len(t.tokens) for t in self.turns)

    def tokens(self) -> np.ndarray:
        """[L] int32 token ids."""
        return np.asarray([tok for t in self.turns for tok in t.tokens], np.int32)

    def loss_mask(self) -> np.ndarray:
        """[L] float32: 1 on trainable model tokens, 0 on prompt, observations and summary context."""
        return np.asarray([float(t.trainable) for t in self.turns for _ in t.tokens], np.float32)

    def behav_logprobs(self) -> np.ndarray:
        """[L] float32 sampler log-probs on trainable tokens, 0 elsewhere."""
        out = [t.logprobs if t.trainable else (0.0,) * len(t.tokens) for t in self.turns]
        return np.asarray([p for lp in out for p in lp], np.float32)

    def policy_versions(self) -> np.ndarray:
        """[L] int32 sampler policy version on trainable tokens, −1 elsewhere."""
        return np.asarray([t.policy_version if t.trainable else -1 for t in self.turns for _ in t.tokens], np.int32)

    def roles(self) -> list[str]:
        """[L] role of each token."""
        return [t.role for t in self.turns for _ in t.tokens]

    @property
    def num_trainable(self) -> int:
        return sum(len(t.tokens) for t in self.turns if t.trainable)


@dataclasses.dataclass(frozen=True)
class Episode:
    """One rollout of one task: its segments, and the reward once the hidden tests ran."""

    segments: tuple[Segment, ...]
    reward: float | None = None
    group_id: Hashable = 0  # rollouts of the same task share it (the advantage group)
    task_id: str = ""

    def with_reward(self, reward: float) -> Episode:
        """A copy with the reward set."""
        return dataclasses.replace(self, reward=float(reward))

    @property
    def turns(self) -> tuple[Turn, ...]:
        return tuple(t for s in self.segments for t in s.turns)

    @property
    def num_trainable(self) -> int:
        return sum(s.num_trainable for s in self.segments)

    @property
    def min_policy_version(self) -> int:
        """Oldest policy version that sampled any trained token (staleness), −1 if none."""
        versions = [t.policy_version for t in self.turns if t.trainable]
        return min(versions) if versions else -1


class SegmentBuilder:
    """Builds an Episode turn by turn; past `context_budget` tokens the context restarts from a self-summary.

    Usage: append model turns (trainable, with logprobs) and observations (not trainable); when `needs_summary`,
    call `request_summary()` (appends the summary prompt, returns the context to sample from), then
    `add_summary(tokens, logprobs, version)`; the next segment starts as system + task + summary. `finish()`.
    """

    def __init__(self, system_tokens: Sequence[int], task_tokens: Sequence[int], summary_prompt_tokens: Sequence[int],
                 context_budget: int):
        if not system_tokens:
            raise ValueError("system_tokens is empty; a segment must start with at least one untrained token")
        prefix = len(system_tokens) + len(task_tokens) + len(summary_prompt_tokens)
        if context_budget <= prefix:
            raise ValueError(f"context_budget={context_budget} must exceed system + task + summary prompt = {prefix}")
        self._system, self._task = tuple(system_tokens), tuple(task_tokens)
        self._summary_prompt = tuple(summary_prompt_tokens)
        self.context_budget = context_budget
        self._segments: list[Segment] = []
        self._awaiting_summary = False
        self._finished = False
        self._start_segment(summary=None)

    def _start_segment(self, summary: tuple[int, ...] | None) -> None:
        """Open a segment with system + task (+ the previous summary as untrained context)."""
        self._turns = [Turn("system", self._system, False), Turn("user", self._task, False)]
        if summary is not None:
            self._turns.append(Turn("summary_context", summary, False))

    def _check_open(self, awaiting_summary: bool) -> None:
        if self._finished:
            raise ValueError("the episode is finished; start a new SegmentBuilder")
        if self._awaiting_summary != awaiting_summary:
            want = "add_summary()" if self._awaiting_summary else "request_summary() first"
            raise ValueError(f"a summary is {'pending' if self._awaiting_summary else 'not requested'}; call {want}")

    @property
    def context(self) -> list[int]:
        """Token ids of the current segment, the context the sampler continues."""
        return [tok for t in self._turns for tok in t.tokens]

    @property
    def needs_summary(self) -> bool:
        """The trigger: the current context has reached the budget."""
        return len(self.context) >= self.context_budget

    def append(self, tokens: Sequence[int], trainable: bool, logprobs: Sequence[float] | None = None, *,
               role: str | None = None, policy_version: int = -1) -> bool:
        """Add a turn (role defaults to "message" if trainable else "tool_output"); returns `needs_summary`."""
        self._check_open(awaiting_summary=False)
        role = role or ("message" if trainable else "tool_output")
        self._turns.append(Turn(role, tuple(tokens), trainable, None if logprobs is None else tuple(logprobs),
                                policy_version))
        return self.needs_summary

    def request_summary(self) -> list[int]:
        """Append the summary prompt; returns the context from which the model writes its summary."""
        self._check_open(awaiting_summary=False)
        self._turns.append(Turn("summary_prompt", self._summary_prompt, False))
        self._awaiting_summary = True
        return self.context

    def add_summary(self, tokens: Sequence[int], logprobs: Sequence[float], policy_version: int) -> None:
        """Append the model's summary (trained on), close the segment, restart from system + task + summary."""
        self._check_open(awaiting_summary=True)
        summary = tuple(tokens)
        self._turns.append(Turn("summary", summary, True, tuple(logprobs), policy_version))
        self._segments.append(Segment(tuple(self._turns)))
        self._awaiting_summary = False
        self._start_segment(summary)

    def finish(self, reward: float | None = None, group_id: Hashable = 0, task_id: str = "") -> Episode:
        """Close the episode; a last segment with no model tokens (ended right after a summary) is dropped."""
        self._check_open(awaiting_summary=False)
        self._finished = True
        last = Segment(tuple(self._turns))
        segments = self._segments + ([last] if last.num_trainable else [])
        return Episode(tuple(segments), None if reward is None else float(reward), group_id, task_id)


# -------------------------------------------------------------------------------------------------------- packing


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where packed item `item` landed: row, first column, length."""

    item: int
    row: int
    start: int
    length: int


@dataclasses.dataclass(frozen=True)
class PackedBatch:
    """Fixed-shape trainer arrays; see the module docstring for the alignment convention."""

    tokens: np.ndarray  # [B, T] int32 token ids, pad_id on padding
    loss_mask: np.ndarray  # [B, T] float32 1 on trained model tokens
    behav_logprobs: np.ndarray  # [B, T] float32 log μ(token) on trained tokens, 0 elsewhere
    advantages: np.ndarray  # [B, T] float32 the episode advantage on trained tokens, 0 elsewhere
    segment_ids: np.ndarray  # [B, T] int32 1, 2, … per segment within its row, 0 on padding
    positions: np.ndarray  # [B, T] int32 position within the segment (restarts at 0), 0 on padding
    policy_versions: np.ndarray  # [B, T] int32 sampler policy version on trained tokens, −1 elsewhere
    placements: tuple[Placement, ...]  # one per input item, in input order


def segments_with_advantages(episodes: Sequence[Episode], advantages: Sequence[float]) -> list[tuple[Segment, float]]:
    """Every segment of episode i paired with advantages[i]: the episode's reward credits all its segments."""
    if len(episodes) != len(advantages):
        raise ValueError(f"{len(episodes)} episodes but {len(advantages)} advantages; expected one per episode")
    return [(s, float(a)) for e, a in zip(episodes, advantages) for s in e.segments]


def first_fit(lengths: Sequence[int], seq_len: int) -> list[tuple[int, int]]:
    """(row, start) per length: each goes into the first row with room, else a new row (first-fit bin packing)."""
    fill: list[int] = []
    out = []
    for i, n in enumerate(lengths):
        if n > seq_len:
            raise ValueError(f"segment {i} has {n} tokens, more than the row length T={seq_len}; raise T or lower "
                             f"the context budget")
        row = next((r for r, used in enumerate(fill) if used + n <= seq_len), len(fill))
        if row == len(fill):
            fill.append(0)
        out.append((row, fill[row]))
        fill[row] += n
    return out


def pack_segments(items: Sequence[tuple[Segment, float]], seq_len: int, batch_size: int | None = None,
                  pad_id: int = 0) -> PackedBatch:
    """First-fit pack (segment, advantage) pairs into [B, T] arrays; B = batch_size, or the rows needed if None."""
    for i, (seg, _) in enumerate(items):
        if len(seg) and seg.loss_mask()[0] > 0:
            raise ValueError(f"segment {i} starts with a trained token, which has no prefix to be predicted from")
    spots = first_fit([len(s) for s, _ in items], seq_len)
    rows = 1 + max((r for r, _ in spots), default=-1)
    b = rows if batch_size is None else batch_size
    if rows > b:
        raise ValueError(f"the segments need {rows} rows of T={seq_len}, more than batch_size={b}")
    tokens = np.full((b, seq_len), pad_id, np.int32)
    mask, logp, adv = (np.zeros((b, seq_len), np.float32) for _ in range(3))
    seg_ids, pos = np.zeros((b, seq_len), np.int32), np.zeros((b, seq_len), np.int32)
    versions = np.full((b, seq_len), -1, np.int32)
    placements, next_id = [], np.zeros(b, np.int32)
    for i, ((seg, a), (row, start)) in enumerate(zip(items, spots)):
        n, sl = len(seg), slice(start, start + len(seg))
        m = seg.loss_mask()
        tokens[row, sl], mask[row, sl], logp[row, sl] = seg.tokens(), m, seg.behav_logprobs()
        adv[row, sl], versions[row, sl] = a * m, seg.policy_versions()
        next_id[row] += 1
        seg_ids[row, sl], pos[row, sl] = next_id[row], np.arange(n)
        placements.append(Placement(i, row, start, n))
    return PackedBatch(tokens, mask, logp, adv, seg_ids, pos, versions, tuple(placements))


def pack_episodes(episodes: Sequence[Episode], advantages: Sequence[float], seq_len: int,
                  batch_size: int | None = None, pad_id: int = 0) -> PackedBatch:
    """Pack all segments of all episodes, each carrying its episode's advantage."""
    return pack_segments(segments_with_advantages(episodes, advantages), seq_len, batch_size, pad_id)
