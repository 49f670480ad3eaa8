"""Context parallelism over the `context` mesh axis: sequence layouts, mesh/spec helpers, all-gather attention.

Layouts. With n devices on the `context` axis a sequence of T tokens is cut into chunks of length c:
  contiguous  n chunks (c = T/n); device i holds chunk i. Causal work grows with i (device n−1 does ~2× the mean).
  zigzag      2n chunks (c = T/2n); device i holds chunks i and 2n−1−i, so every device owns one early and one
              late chunk and does the same causal work (Brandon et al. 2023, "Striped/zigzag" ring attention).
A sharded array [B, T, ...] "in zigzag layout" is the natural-order array passed through `zigzag(x, n)`: its
contiguous T/n slice on device i is [chunk i; chunk 2n−1−i]. The data path applies `zigzag` to tokens, positions,
segment ids AND labels/loss masks alike (`zigzag_batch`); everything but attention is per-token, so the model is
layout-agnostic, and the context-parallel attention kernels read the layout from their `ContextOptions.layout`
(the model kernels 'ring', 'ring_latent', 'allgather_cp', 'allgather_cp_latent' use zigzag).

All-gather context parallelism (`allgather_attention`) is the simple comparison mode: every device all-gathers the
keys/values (or the MLA latent) of the whole sequence and attends its local queries to them with the global token
indices of its zigzag chunks as the causal positions. Memory O(T) per device for K/V and O(T²/n) for the logits;
communication one all-gather forward and one reduce-scatter of dK/dV backward (plain autodiff through shard_map).
"""

from __future__ import annotations

from typing import Mapping, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from composer2_jax.model.attention_mask import CAUSAL, AttentionMask
from composer2_jax.sharding import LOGICAL_RULES, Placement, check_divisible, logical_to_spec

CONTEXT_AXIS = "context"
LAYOUTS = ("zigzag", "contiguous")

# Logical names of the activations the context-parallel kernels take (the rules table maps them to mesh axes).
HEADS_BTHK = ("activation_batch", "activation_length", "activation_heads", "activation_kv")
LSE_BTH = ("activation_batch", "activation_length", "activation_heads")
LATENT_BTL = ("activation_batch", "activation_length", "activation_kv")
TOKENS_BT = ("activation_batch", "activation_length")
WEIGHT_LHX = (None, "activation_heads", None)


# ----------------------------------------------------------------------------------------------- layouts


def check_length(t: int, n: int, layout: str = "zigzag", what: str = "sequence length"):
    """Raise unless T splits into the layout's chunks (2n for zigzag, n for contiguous)."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown context layout {layout!r}; expected one of {LAYOUTS}")
    parts = 2 * n if layout == "zigzag" else n
    if n > 1 and t % parts:
        mult = "2×context" if layout == "zigzag" else "context"
        raise ValueError(f"{what} T={t} is not divisible by {mult}={parts} (context={n}, layout={layout!r})")


def layout_permutation(t: int, n: int, layout: str = "zigzag") -> np.ndarray:
    """perm [T]: position j of the layout holds natural token perm[j] (identity for contiguous)."""
    check_length(t, n, layout)
    if layout == "contiguous" or n == 1:
        return np.arange(t)
    c = t // (2 * n)
    order = [k for i in range(n) for k in (i, 2 * n - 1 - i)]  # chunk ids in layout order
    return np.concatenate([np.arange(k * c, (k + 1) * c) for k in order])


def zigzag(x, n: int, axis: int = 1):
    """Natural order → zigzag layout along `axis` (2n chunks; shard i holds chunks i and 2n−1−i)."""
    return jnp.take(x, layout_permutation(x.shape[axis], n), axis=axis)


def unzigzag(x, n: int, axis: int = 1):
    """Zigzag layout → natural order along `axis` (the inverse of `zigzag`)."""
    return jnp.take(x, np.argsort(layout_permutation(x.shape[axis], n)), axis=axis)


def zigzag_batch(batch: Mapping[str, jax.Array], n: int, axis: int = 1) -> dict[str, jax.Array]:
    """Apply `zigzag` to every per-token array of a batch (tokens, positions, segment ids, labels, masks)."""
    return {k: zigzag(v, n, axis) for k, v in batch.items()}


def shard_chunks(i, n: int, layout: str = "zigzag"):
    """Chunk ids held by shard i: (i, 2n−1−i) for zigzag, (i,) for contiguous."""
    return (i, 2 * n - 1 - i) if layout == "zigzag" else (i,)


def shard_token_index(i, t_local: int, n: int, layout: str = "zigzag"):
    """Global (natural-order) token index [T/n] of the rows of shard i; i may be traced (lax.axis_index)."""
    chunks = shard_chunks(i, n, layout)
    c = t_local // len(chunks)
    return jnp.concatenate([k * c + jnp.arange(c, dtype=jnp.int32) for k in chunks])


# ----------------------------------------------------------------------------------------------- analytic block work


def device_block_pairs(n: int, layout: str = "zigzag", causal: bool = True, fused_causal: bool = True) -> list[float]:
    """(query, key) pairs each device computes in a causal ring, in units of (T/n)² — the analytic balance.

    A diagonal block (the device's own keys) costs 1/2 with a fused causal kernel, 1 when the kernel computes the
    masked half too (the XLA block); fully masked blocks are skipped and cost 0.
    """
    diag = 0.5 if fused_causal else 1.0
    if not causal:
        return [float(n)] * n
    work = []
    for i in range(n):
        if layout == "zigzag":  # every off-diagonal step: q(all)×kv(chunk 0) or q(chunk 1)×kv(all) = half a block
            work.append(diag + 0.5 * (n - 1))
        else:  # contiguous: full blocks from the i earlier devices, skipped blocks from the later ones
            work.append(diag + 1.0 * i)
    return work


# ----------------------------------------------------------------------------------------------- mesh and specs


def context_size(mesh, axis: str = CONTEXT_AXIS) -> int:
    """Size of the context axis of `mesh` (1 without a mesh or without the axis)."""
    if mesh is None or axis not in mesh.axis_names:
        return 1
    return int(dict(mesh.shape)[axis])


def spec_for(mesh, logical: Sequence[Optional[str]], rules: tuple = LOGICAL_RULES) -> P:
    """PartitionSpec of an activation from `rules` (inside a pipeline stage `sharding.within_stage`: no `stage`,
    since the stage vmap owns that axis), keeping only axes that exist in `mesh`."""
    names = set(mesh.axis_names)
    out = []
    for entry in logical_to_spec(logical, rules):
        axes = (entry,) if isinstance(entry, str) else tuple(entry or ())
        axes = tuple(a for a in axes if a in names)
        out.append(None if not axes else axes[0] if len(axes) == 1 else axes)
    return P(*out)


def replicated_axes(mesh, spec: P) -> tuple[str, ...]:
    """Mesh axes an array with `spec` is replicated over (a weight gradient is psum'd over them)."""
    used = {a for e in spec for a in ((e,) if isinstance(e, str) else (e or ()))}
    return tuple(a for a in mesh.axis_names if a not in used)


def check_specs(mesh, named: Mapping[str, tuple[tuple[int, ...], P]]):
    """Divisibility of every (shape, spec) pair by the mesh, with errors naming the array."""
    for name, (shape, spec) in named.items():
        check_divisible(name, shape, spec, mesh)


# ----------------------------------------------------------------------------------------------- all-gather CP


def expand_latent(ckv_BSL, kr_BSR, w_LHX, nope_dim: int):
    """MLA up-projection of a latent block: keys [B, S, H, N+R] and values [B, S, H, V] (W_kvb = w_LHX)."""
    kv_BSHX = jnp.einsum("BSL,LHX->BSHX", ckv_BSL, w_LHX)
    k_nope_BSHN, v_BSHV = kv_BSHX[..., :nope_dim], kv_BSHX[..., nope_dim:]
    kr_BSHR = jnp.broadcast_to(kr_BSR[:, :, None, :], k_nope_BSHN.shape[:3] + kr_BSR.shape[-1:])
    return jnp.concatenate([k_nope_BSHN, kr_BSHR], axis=-1), v_BSHV


class ContextOptions(NamedTuple):
    """Where and how a context-parallel attention call runs (static: hashable, never traced)."""

    placement: Placement = Placement()  # mesh with a `context` axis (None: one local block) + rules of the specs
    layout: str = "zigzag"  # 'zigzag' (balanced causal work) | 'contiguous'
    block_kernel: str = "auto"  # ring block kernel: 'auto' | 'xla' | 'xla_chunked' | 'cudnn' | 'splash' (ring only)

    @classmethod
    def on(cls, mesh, layout: str = "zigzag", block_kernel: str = "auto") -> "ContextOptions":
        """Options on `mesh` (a Mesh, a Placement or None) with the project's rules."""
        return cls(Placement.of(mesh), layout, block_kernel)


def allgather_attention(q_BTHK, kv: tuple, w_LHX=None, *, scale: float, mask: AttentionMask = CAUSAL,
                        options: ContextOptions = ContextOptions()):
    """All-gather context parallelism: gather K/V (or the latent) over `context`, attend the local queries.

    Args:
      q_BTHK: queries in `options.layout` order, sharded over context on T.
      kv: (k_BSHK, v_BSHV), or the latent (ckv_BSL, kr_BSR) when w_LHX (W_kvb) is given: re-projected after the
        gather.
      mask: causal flag and [B, T] packing ids in the same layout (both or neither); no explicit positions (the
        layout gives them).
      options: the placement (a mesh with a `context` axis and the rules the shard_map specs come from: inside the
        model, the layer's Placement) and the layout.
    Returns:
      [B, T, H, V] attention output in `options.layout` order.
    """
    from composer2_jax.model.attention import (
        xla_attention,  # lazy: attention imports this module's kernels
    )

    mesh, rules, layout, latent = options.placement.mesh, options.placement.rules, options.layout, w_LHX is not None
    if mesh is None:
        raise ValueError("allgather_attention needs a mesh with a `context` axis in options.placement, got none")
    _reject_indices(mask.q_idx, mask.kv_idx)
    n = context_size(mesh)
    t = q_BTHK.shape[1]
    check_length(t, n, layout)
    has_seg = _check_segments(mask.q_segment_ids, mask.kv_segment_ids)
    heads, tok = spec_for(mesh, HEADS_BTHK, rules), spec_for(mesh, TOKENS_BT, rules)
    kv_specs = (spec_for(mesh, LATENT_BTL, rules),) * 2 if latent else (heads, heads)
    w_spec = spec_for(mesh, WEIGHT_LHX, rules)
    nope = q_BTHK.shape[-1] - kv[1].shape[-1] if latent else 0
    kv_idx_S = jnp.asarray(layout_permutation(t, n, layout), jnp.int32)

    def shard(q_, kv_, segs_, w_):
        i = jax.lax.axis_index(CONTEXT_AXIS)
        kv_all = tuple(jax.lax.all_gather(a, CONTEXT_AXIS, axis=1, tiled=True) for a in kv_)
        k_, v_ = expand_latent(*kv_all, w_, nope) if latent else kv_all
        bq = q_.shape[0]
        q_idx = jnp.broadcast_to(shard_token_index(i, q_.shape[1], n, layout), (bq, q_.shape[1]))
        kv_idx = jnp.broadcast_to(kv_idx_S, (bq, t))
        q_seg, kv_seg = (segs_[0], jax.lax.all_gather(segs_[1], CONTEXT_AXIS, axis=1, tiled=True)) if has_seg \
            else (None, None)
        return xla_attention(q_, k_, v_, scale=scale, mask=AttentionMask(mask.causal, q_seg, kv_seg, q_idx, kv_idx))

    segs = (mask.q_segment_ids, mask.kv_segment_ids) if has_seg else ()
    w = w_LHX if latent else jnp.zeros((), q_BTHK.dtype)
    check_specs(mesh, {"queries": (q_BTHK.shape, heads)})
    fn = jax.shard_map(shard, mesh=mesh, in_specs=(heads, kv_specs, (tok,) * len(segs), w_spec if latent else P()),
                       out_specs=heads)
    return fn(q_BTHK, tuple(kv), segs, w)


def _check_segments(q_seg, kv_seg) -> bool:
    """Self-attention packing: segment ids come for both sides or for neither."""
    if (q_seg is None) != (kv_seg is None):
        raise ValueError("context-parallel attention needs q_segment_ids and kv_segment_ids together (or neither)")
    return q_seg is not None


def allgather_kernel(q_BTHK, k_BSHK, v_BSHV, *, scale: float, mask: AttentionMask = CAUSAL,
                     placement: Placement = Placement()):
    """Model kernel 'allgather_cp': all-gather CP over the placement's mesh (zigzag layout), dense attention
    without a context axis."""
    from composer2_jax.model.attention import xla_attention

    if context_size(placement.mesh) == 1:
        return xla_attention(q_BTHK, k_BSHK, v_BSHV, scale=scale, mask=mask)
    return allgather_attention(q_BTHK, (k_BSHK, v_BSHV), scale=scale, mask=mask, options=ContextOptions(placement))


allgather_kernel.takes_placement = True


def allgather_latent_kernel(q_BTHK, ckv_BSL, kr_BSR, w_LHX, *, scale: float, mask: AttentionMask = CAUSAL,
                            placement: Placement = Placement()):
    """Model kernel 'allgather_cp_latent': all-gather the MLA latent (576 values/token for Kimi K2), expand locally."""
    from composer2_jax.model.attention import xla_attention

    if context_size(placement.mesh) == 1:
        k, v = expand_latent(ckv_BSL, kr_BSR, w_LHX, q_BTHK.shape[-1] - kr_BSR.shape[-1])
        return xla_attention(q_BTHK, k, v, scale=scale, mask=mask)
    return allgather_attention(q_BTHK, (ckv_BSL, kr_BSR), w_LHX, scale=scale, mask=mask,
                               options=ContextOptions(placement))


allgather_latent_kernel.takes_latent = True
allgather_latent_kernel.takes_placement = True


def _reject_indices(q_idx, kv_idx):
    """Context-parallel kernels derive token order from their layout; explicit indices would be ambiguous."""
    if q_idx is not None or kv_idx is not None:
        raise ValueError("context-parallel attention derives causal positions from the zigzag layout; "
                         "q_idx/kv_idx must be None (pass zigzagged positions/segment ids to the model instead)")
