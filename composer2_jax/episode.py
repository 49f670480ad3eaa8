"""Multi-turn episodes: turns → segments → episode, and self-summarisation (`SegmentBuilder`).

Shared by the agent harness (env/), the RL services (rl/) and the benchmark (bench/); tokenizer-free: callers pass
token id lists. An episode is one or more segments; a segment is one context window the model saw, a sequence of
turns. Past a token budget the model is asked to summarise its work (a summary prompt is appended, the model writes
a summary), and the next segment restarts from system + task + summary. The episode's single reward credits every
segment, the summary tokens included: all segments of an episode carry the episode's advantage (so summaries that
lead to success are reinforced). Packing into trainer arrays lives in rl/trajectory.py.
"""

from __future__ import annotations

import copy
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
    def closed_segments(self) -> tuple[Segment, ...]:
        """The segments closed by a summary so far."""
        return tuple(self._segments)

    @property
    def current_turns(self) -> tuple[Turn, ...]:
        """The turns of the open segment (its first two: system and task)."""
        return tuple(self._turns)

    def fork(self) -> SegmentBuilder:
        """An independent copy that continues from here (turns and segments are immutable, so they are shared)."""
        twin = copy.copy(self)
        twin._segments, twin._turns = list(self._segments), list(self._turns)
        return twin

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
