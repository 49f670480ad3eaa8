"""Router replay records: from the sampler's per-call routing to [L_moe, B, T, k] arrays aligned with a PackedBatch.

The engine reports, for each generate call with prompt length P and n new tokens, `prompt_routing` [P−1, L, k]
(experts of forward positions 0..P−2) and `routing` [n, L, k] (experts of the position that produced each new
token: positions P−1 .. P+n−2). Within a segment every call's prompt + reply is a prefix of the segment's tokens.
A segment's replay record takes the last call's prompt routing (the context as last prefilled), then each call's
own decode-time routing over the positions where it sampled, so every trained token is replayed with exactly the
experts that produced its behaviour log-prob μ. Positions nothing recorded (tokens after the last reply, padding)
get experts 0..k−1: they never influence a trained token (causal attention, per-token routing).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from composer2_jax.episode import Episode
from composer2_jax.rl.trajectory import Placement


@dataclasses.dataclass(frozen=True)
class CallRecord:
    """What one generate call saw and produced."""

    prompt: tuple[int, ...]
    ids: tuple[int, ...]
    routing: np.ndarray | None  # [n, L, k] int32
    prompt_routing: np.ndarray | None  # [P−1, L, k] int32


def _is_prefix(call: CallRecord, tokens: np.ndarray) -> bool:
    """prompt + ids is a prefix of tokens."""
    seq = call.prompt + call.ids
    return len(seq) <= len(tokens) and tuple(int(t) for t in tokens[:len(seq)]) == seq


def assign_calls(segment_tokens: Sequence[np.ndarray], calls: Sequence[CallRecord]) -> list[list[CallRecord]]:
    """Split the episode's calls (in order) into consecutive runs, one per segment."""
    out: list[list[CallRecord]] = [[] for _ in segment_tokens]
    s = 0
    for call in calls:
        while s < len(segment_tokens) and not _is_prefix(call, segment_tokens[s]):
            s += 1
        if s == len(segment_tokens):
            break  # a call whose reply was dropped (e.g. after the last kept segment)
        out[s].append(call)
    return out


def filler(num_layers: int, length: int, k: int) -> np.ndarray:
    """[L, length, k] experts 0..k−1 (positions without a record)."""
    return np.broadcast_to(np.arange(k, dtype=np.int32), (num_layers, length, k)).copy()


def segment_routing(length: int, calls: Sequence[CallRecord], num_layers: int, k: int) -> np.ndarray:
    """[L, length, k] replay record of one segment from its calls (see the module docstring)."""
    out = filler(num_layers, length, k)
    if not calls:
        return out
    last = calls[-1]
    if last.prompt_routing is not None:
        n = min(len(last.prompt_routing), length)
        out[:, :n] = last.prompt_routing[:n].transpose(1, 0, 2)
    for call in calls:
        if call.routing is None:
            continue
        start = len(call.prompt) - 1
        n = max(0, min(len(call.ids), length - start))
        out[:, start:start + n] = call.routing[:n].transpose(1, 0, 2)
    return out


def episode_routing(episode: Episode, calls: Sequence[CallRecord], num_layers: int, k: int
                    ) -> list[np.ndarray | None]:
    """Per segment [L, len, k] of an episode, or Nones for a dense model (num_layers = 0)."""
    if num_layers == 0:
        return [None] * len(episode.segments)
    tokens = [s.tokens() for s in episode.segments]
    per_segment = assign_calls(tokens, calls)
    return [segment_routing(len(t), c, num_layers, k) for t, c in zip(tokens, per_segment)]


def pack_routing(placements: Sequence[Placement], records: Sequence[np.ndarray | None], rows: int, seq_len: int,
                 num_layers: int, k: int) -> np.ndarray:
    """[L, B, T, k] records placed where `pack_segments` put each segment (filler elsewhere)."""
    if len(placements) != len(records):
        raise ValueError(f"{len(placements)} placements but {len(records)} routing records; expected one each")
    out = np.broadcast_to(np.arange(k, dtype=np.int32), (num_layers, rows, seq_len, k)).copy()
    for p, rec in zip(placements, records):
        if rec is None:
            continue
        if rec.shape != (num_layers, p.length, k):
            raise ValueError(f"routing record {rec.shape} for a segment of {p.length} tokens; expected "
                             f"{(num_layers, p.length, k)}")
        out[:, p.row, p.start:p.start + p.length] = rec
    return out
