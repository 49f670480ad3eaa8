"""Statistics of the weight change between two published versions, as a weight-sync transport would see it.

Parameters are compared in bf16 (what the inference side serves): the fraction of bit-identical bf16 values
(how sparse an update is), and the zlib-compressed size of the XOR of the two versions' bf16 bit patterns (what a
delta-compressed broadcast would send; unchanged values XOR to zero and compress away).
"""

from __future__ import annotations

import zlib

import jax
import numpy as np


def bf16_bits(x) -> np.ndarray:
    """The bf16 bit patterns of an array (any float dtype), flattened uint16."""
    import ml_dtypes  # a jax dependency

    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16).ravel()


def delta_stats(prev, new, level: int = 1) -> dict[str, float]:
    """{identical_frac, xor_zlib_bytes, bf16_bytes, compression} of new vs prev (same tree structure)."""
    prev_leaves, new_leaves = jax.tree.leaves(jax.device_get(prev)), jax.tree.leaves(jax.device_get(new))
    if len(prev_leaves) != len(new_leaves):
        raise ValueError(f"weight trees differ: {len(prev_leaves)} vs {len(new_leaves)} leaves")
    same = total = 0
    comp = zlib.compressobj(level)
    size = 0
    for a, b in zip(prev_leaves, new_leaves):
        if np.shape(a) != np.shape(b):
            raise ValueError(f"weight leaf shapes differ: {np.shape(a)} vs {np.shape(b)}")
        xor = bf16_bits(a) ^ bf16_bits(b)
        same += int(np.count_nonzero(xor == 0))
        total += xor.size
        size += len(comp.compress(xor.tobytes()))
    size += len(comp.flush())
    raw = 2 * total
    return {"identical_frac": same / max(total, 1), "xor_zlib_bytes": float(size), "bf16_bytes": float(raw),
            "compression": raw / max(size, 1)}
