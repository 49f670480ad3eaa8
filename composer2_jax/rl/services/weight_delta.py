"""Statistics of the weight change between two published versions, as a weight-sync transport would see it.

Parameters are compared in bf16 (what the inference side serves): the fraction of bit-identical bf16 values
(how sparse an update is), and the zlib-compressed size of the XOR of the two versions' bf16 bit patterns (what a
delta-compressed broadcast would send; unchanged values XOR to zero and compress away). And the deltas themselves:
`encode_delta` / `apply_delta`, bit-exact in the trainer's dtype, sent on the Ray object-store path when
`rl.ray.weight_deltas` is set (ray_actors.WeightRegistry).
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Any

import jax
import numpy as np

from composer2_jax.rl.services.weights import Weights


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


# ------------------------------------------------------------------------------------------ deltas actually sent
#
# A version sent as a delta from the previous one, bit for bit in the trainer's dtype. Per leaf, the smallest of:
#   xor     zlib(prev_bits ^ new_bits): unchanged values XOR to zero, small changes leave the high bits zero
#   sparse  the changed flat indices (uint32) and their new values: an update that touches few values
#   full    the new values raw: a dense update whose XOR does not compress
# The receiver applies a delta only to the version it was made from; a receiver that missed a version resyncs in full.

KINDS = ("xor", "sparse", "full")


@dataclasses.dataclass(frozen=True)
class WeightDelta:
    """Version `version` as a change from `base_version`: one (kind, payload) per leaf of (params, router_state)."""

    base_version: int
    version: int
    leaves: tuple  # per leaf: ("xor", zlib bytes) | ("sparse", (uint32 indices, values)) | ("full", values)

    @property
    def nbytes(self) -> int:
        """Bytes of the payloads (what crosses the wire, framing aside)."""
        return sum(_payload_bytes(kind, p) for kind, p in self.leaves)

    def kinds(self) -> dict[str, int]:
        """How many leaves went as each kind."""
        return {k: sum(kind == k for kind, _ in self.leaves) for k in KINDS}


def _payload_bytes(kind: str, payload) -> int:
    """Bytes of one leaf's encoding: zlib bytes (xor), indices + values (sparse), or the values (full)."""
    if kind == "xor":
        return len(payload)
    if kind == "sparse":
        return payload[0].nbytes + payload[1].nbytes
    return payload.nbytes


def _bits(x: np.ndarray) -> np.ndarray:
    """The raw bit patterns of an array, flattened (unsigned ints of its itemsize: exact for any float)."""
    x = np.ascontiguousarray(x)
    return x.reshape(-1).view(np.dtype(f"u{x.dtype.itemsize}"))


def _host_leaves(tree) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(jax.device_get(tree))]


def full_bytes(weights) -> int:
    """Bytes of a full publication of `weights` (params and router state, in their dtypes)."""
    return sum(x.nbytes for x in _host_leaves((weights.params, weights.router_state)))


def _encode_leaf(prev: np.ndarray, new: np.ndarray, level: int) -> tuple[str, Any]:
    """The smallest encoding of one leaf's change."""
    if prev.shape != new.shape or prev.dtype != new.dtype:
        raise ValueError(f"weight leaf changed from {prev.shape} {prev.dtype} to {new.shape} {new.dtype}; a delta "
                         f"needs the same shape and dtype")
    xor = _bits(prev) ^ _bits(new)
    changed = np.flatnonzero(xor).astype(np.uint32)
    flat = np.ascontiguousarray(new).reshape(-1)
    options = [("full", flat), ("sparse", (changed, flat[changed]))]
    if changed.size:  # an unchanged leaf is an empty sparse entry
        options.append(("xor", zlib.compress(xor.tobytes(), level)))
    return min(options, key=lambda o: _payload_bytes(*o))


def encode_delta(prev, new, level: int = 1) -> WeightDelta:
    """`new` (Weights) as a WeightDelta from `prev` (Weights); apply_delta(prev, ·) gives `new` bit for bit."""
    if new.version <= prev.version:
        raise ValueError(f"a delta goes forward: version {new.version} from {prev.version}")
    a, b = _host_leaves((prev.params, prev.router_state)), _host_leaves((new.params, new.router_state))
    if len(a) != len(b):
        raise ValueError(f"weight trees differ: {len(a)} vs {len(b)} leaves")
    return WeightDelta(prev.version, new.version, tuple(_encode_leaf(x, y, level) for x, y in zip(a, b)))


def _apply_leaf(prev: np.ndarray, kind: str, payload) -> np.ndarray:
    if kind == "full":
        return payload.reshape(prev.shape)
    if kind == "sparse":
        out = np.array(prev).reshape(-1)  # a copy: published trees are never mutated
        out[payload[0]] = payload[1]
        return out.reshape(prev.shape)
    bits = _bits(prev) ^ np.frombuffer(zlib.decompress(payload), _bits(prev).dtype)
    return bits.view(prev.dtype).reshape(prev.shape)


def apply_delta(prev, delta: WeightDelta):
    """The Weights `delta` encodes, from `prev` (host arrays; prev.version must be delta.base_version)."""
    if prev.version != delta.base_version:
        raise ValueError(f"delta to version {delta.version} is from version {delta.base_version}, but the receiver "
                         f"holds version {prev.version}; resync in full")
    tree = jax.device_get((prev.params, prev.router_state))
    leaves, treedef = jax.tree.flatten(tree)
    if len(leaves) != len(delta.leaves):
        raise ValueError(f"delta has {len(delta.leaves)} leaves; the receiver's weights have {len(leaves)}")
    params, router_state = jax.tree.unflatten(
        treedef, [_apply_leaf(np.asarray(x), k, p) for x, (k, p) in zip(leaves, delta.leaves)])
    return Weights(delta.version, params, router_state)
