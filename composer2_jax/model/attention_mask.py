"""Which keys each query sees: the one mask description every attention kernel takes (`mask=`).

A query at index q_idx[b, t] sees the key at kv_idx[b, s] iff (not causal or kv_idx ≤ q_idx) and, when packed,
q_segment_ids[b, t] == kv_segment_ids[b, s]. Indices default to 0 … T−1 and 0 … S−1 (natural order); the
context-parallel kernels derive them from their layout instead and refuse explicit ones.

`AttentionMask` is a pytree: the id and index arrays are its leaves (so a mask can cross jit, scan and shard_map
boundaries) and `causal` is static metadata (it decides which code is traced, so it is never a tracer).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import numpy as np


@dataclasses.dataclass(frozen=True, eq=False)  # eq=False: fields hold arrays, which do not compare to a bool
class AttentionMask:
    """Causal flag, packing ids and explicit positions of one attention call (all optional but `causal`)."""

    causal: bool = True  # key index ≤ query index (static)
    q_segment_ids: Optional[jax.Array] = None  # [B, T] packing ids of the queries (with kv_segment_ids)
    kv_segment_ids: Optional[jax.Array] = None  # [B, S] packing ids of the keys
    q_idx: Optional[jax.Array] = None  # [B, T] causal position of each query row (None: 0 … T−1)
    kv_idx: Optional[jax.Array] = None  # [B, S] causal position of each key row (None: 0 … S−1)

    def __post_init__(self):
        if not isinstance(self.causal, (bool, np.bool_)):
            raise TypeError(f"AttentionMask.causal must be a Python bool (it selects the traced code), got "
                            f"{self.causal!r} of type {type(self.causal).__name__}")

    @classmethod
    def self_attention(cls, segment_ids=None, causal: bool = True) -> "AttentionMask":
        """Self-attention of a packed (or unpacked: segment_ids None) sequence: the same ids on both sides."""
        return cls(causal, segment_ids, segment_ids)

    @property
    def has_indices(self) -> bool:
        """Whether explicit query or key positions are given."""
        return self.q_idx is not None or self.kv_idx is not None

    def replace(self, **changes) -> "AttentionMask":
        """A copy with some fields changed (e.g. one query chunk's ids and positions)."""
        return dataclasses.replace(self, **changes)


jax.tree_util.register_dataclass(AttentionMask, data_fields=["q_segment_ids", "kv_segment_ids", "q_idx", "kv_idx"],
                                 meta_fields=["causal"])

CAUSAL = AttentionMask()  # plain causal attention in natural order, no packing
