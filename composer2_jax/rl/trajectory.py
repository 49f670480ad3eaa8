"""Packing episodes into trainer arrays (the episode types themselves live in composer2_jax/episode.py).

Alignment convention of the packed arrays: everything is aligned with `tokens` (not shifted). loss_mask[b, t] = 1
means tokens[b, t] was sampled by the model and behav_logprobs[b, t] = log μ(tokens[b, t] | tokens of its segment
before t). The trainer takes log π_θ(tokens[b, t]) from the logits at t − 1 of the same segment, which exists
because a segment's first token (the system prompt) is never trained on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from composer2_jax.episode import Episode, Segment


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


def pack_segments(items: Sequence[tuple[Segment, float | np.ndarray]], seq_len: int, batch_size: int | None = None,
                  pad_id: int = 0) -> PackedBatch:
    """First-fit pack (segment, advantage) pairs into [B, T] arrays; B = batch_size, or the rows needed if None.

    An advantage is one float for the whole segment, or a per-token array [L] (tree groups: rl/tree.py)."""
    for i, (seg, a) in enumerate(items):
        if len(seg) and seg.loss_mask()[0] > 0:
            raise ValueError(f"segment {i} starts with a trained token, which has no prefix to be predicted from")
        if np.ndim(a) not in (0, 1) or (np.ndim(a) == 1 and len(a) != len(seg)):
            raise ValueError(f"segment {i} has {len(seg)} tokens but an advantage of shape {np.shape(a)}; expected "
                             f"a scalar or [{len(seg)}]")
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
        adv[row, sl], versions[row, sl] = np.asarray(a, np.float32) * m, seg.policy_versions()
        next_id[row] += 1
        seg_ids[row, sl], pos[row, sl] = next_id[row], np.arange(n)
        placements.append(Placement(i, row, start, n))
    return PackedBatch(tokens, mask, logp, adv, seg_ids, pos, versions, tuple(placements))


def pack_episodes(episodes: Sequence[Episode], advantages: Sequence[float], seq_len: int,
                  batch_size: int | None = None, pad_id: int = 0) -> PackedBatch:
    """Pack all segments of all episodes, each carrying its episode's advantage."""
    return pack_segments(segments_with_advantages(episodes, advantages), seq_len, batch_size, pad_id)
