"""Causal block-skipping attention in XLA: a static triangular schedule of (query block, key block) pairs.

`chunked_attention` (attention.py) lets every query chunk see all S keys and masks the upper half away, so a causal
self-attention computes n² blocks of which n(n−1)/2 are fully masked. Here T = S is cut into n blocks of c rows and
only the n(n+1)/2 pairs (i, j ≤ i) are visited, row-major, under one `lax.scan` (FlashAttention-2, Dao 2023):
  1. forward: for each pair, the block's (o, lse) from the ring's block kernel (kernels.py, the same contract);
     the running (o, lse) of query block i merges them, lse = logaddexp(lse, lse_ij), o = Σ exp(lse_· − lse)·o_·,
     and is written to row i of the output (the last write of row i is its pair (i, i)).
  2. backward (custom VJP, saved: q, k, v, o, lse): delta = Σ_V dO·O, then for each pair the block's
     (dq, dk, dv) from the final (o, lse) (FA-2 alg. 2) accumulated into dq[i], dk[j], dv[j].
Only the diagonal pairs carry the causal triangle; segment ids (packing) mask inside every visited pair. Memory:
O(c²) logits per step, no [T, S] array in either pass; FLOPs: (n + 1) / 2n of the masked kernel's blocks, and the
backward recomputes the logits but not o (4 K-wide and 3 V-wide block einsums per pair, against 4 + 4 for
the rematerialised `chunked_attention`).

Valid only for plain causal self-attention: T = S, query t at key index t (no explicit positions: a zigzag or
context-parallel layout permutes the rows, so "block j ≤ i" is no longer "visible"). Anything else falls back to
`chunked_attention` through kernel_paths (an error in strict mode). In the planner's counting mode
(model/planning.py) the pairs are taken as one batched piece (vmap over the schedule): XLA's cost analysis counts
a scan body once, the batched piece counts the n(n+1)/2 pairs' FLOPs exactly.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from composer2_jax.model import kernel_paths, planning
from composer2_jax.model.attention_mask import CAUSAL, AttentionMask
from composer2_jax.model.kernels import NEG_INF, _masked_bwd, _masked_fwd, join_chunks, split_chunks

CHUNK = 512  # rows per block (the same default as chunked_attention)


def triangle(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The (query block i, key block j ≤ i) pairs of n blocks, row-major: two int32 arrays of n(n+1)/2."""
    i, j = np.tril_indices(n)
    return i.astype(np.int32), j.astype(np.int32)


def _pair_mask(i, j, c: int, seg):
    """[B|1, 1, c, c] visibility of pair (i, j): the causal triangle on the diagonal, all of an off-diagonal pair,
    and equal segment ids when packed (seg: (query ids, key ids), each [n, B, c]; or None)."""
    r = jnp.arange(c)
    mask = ((r[:, None] >= r[None, :]) | (j < i))[None, None]
    if seg is not None:
        qs_nBc, ks_nBc = seg
        mask = mask & (qs_nBc[i][:, :, None] == ks_nBc[j][:, None, :])[:, None]
    return mask


def _merge(o_a, lse_a, o_b, lse_b):
    """Exact merge of two partial softmax outputs over disjoint keys (fp32 o [B, c, H, V], lse [B, c, H])."""
    lse = jnp.logaddexp(lse_a, lse_b)
    w = lambda x: jnp.exp(x - lse)[..., None]  # noqa: E731
    return w(lse_a) * o_a + w(lse_b) * o_b, lse


def _in_loop(i, j, q_i):
    """(i, j, q_i) through an optimization barrier. The pair's mask depends only on (i, j) and the segment ids, none
    of them differentiated: under `grad`, JAX's partial evaluation of this scan would build every pair's mask in a
    loop of its own, broadcast over the heads, and keep all of them for this one to read — [n(n+1)/2, B, H, c, c]
    bools, 34.9 GB per device for kimi_k2_5 at 32k (docs/scaling.md). Tied to the query block, which is
    differentiated, the mask is built here, one pair at a time."""
    return jax.lax.optimization_barrier((i, j, q_i))


def _fwd_scan(q, k, v, seg, scale, n):
    """Forward over the triangle under one scan: (o [n, B, c, H, V] fp32, lse [n, B, c, H] fp32)."""
    q_, k_, v_ = split_chunks(q, n), split_chunks(k, n), split_chunks(v, n)
    c = q_.shape[2]
    o_buf = jnp.zeros(q_.shape[:4] + (v.shape[-1],), jnp.float32)
    lse_buf = jnp.full(q_.shape[:4], NEG_INF, jnp.float32)

    def step(carry, ij):
        o_run, lse_run, o_buf, lse_buf = carry
        i, j, q_i = _in_loop(*ij, q_[ij[0]])
        o_b, lse_b = _masked_fwd(q_i, k_[j], v_[j], scale, _pair_mask(i, j, c, seg))
        first = j == 0  # a new query row starts from nothing
        o_run, lse_run = _merge(jnp.where(first, 0.0, o_run), jnp.where(first, NEG_INF, lse_run), o_b, lse_b)
        return (o_run, lse_run, o_buf.at[i].set(o_run), lse_buf.at[i].set(lse_run)), None

    carry = (o_buf[0], lse_buf[0], o_buf, lse_buf)
    (_, _, o_buf, lse_buf), _ = jax.lax.scan(step, carry, tuple(map(jnp.asarray, triangle(n))))
    return o_buf, lse_buf


def _fwd_batched(q, k, v, seg, scale, n):
    """`_fwd_scan` with the pairs as one vmapped piece (planner counting mode: every pair's FLOPs counted)."""
    q_, k_, v_ = split_chunks(q, n), split_chunks(k, n), split_chunks(v, n)
    c = q_.shape[2]
    ii, jj = map(jnp.asarray, triangle(n))
    o_P, lse_P = jax.vmap(lambda i, j: _masked_fwd(q_[i], k_[j], v_[j], scale, _pair_mask(i, j, c, seg)))(ii, jj)
    m = jax.ops.segment_max(lse_P, ii, n, indices_are_sorted=True)  # [n, B, c, H]
    lse = m + jnp.log(jax.ops.segment_sum(jnp.exp(lse_P - m[ii]), ii, n, indices_are_sorted=True))
    o = jax.ops.segment_sum(jnp.exp(lse_P - lse[ii])[..., None] * o_P, ii, n, indices_are_sorted=True)
    return o, lse


def _bwd_scan(q, k, v, seg, scale, n, cot):
    """Backward over the triangle under one scan, cot = (lse, do, delta) blocked [n, B, c, ...]: fp32 (dq, dk, dv)
    as [n, B, c, ...]."""
    lse_, do_, delta_ = cot
    q_, k_, v_ = split_chunks(q, n), split_chunks(k, n), split_chunks(v, n)
    c = q_.shape[2]

    def step(acc, ij):
        dq, dk, dv = acc
        i, j = ij
        dq_b, dk_b, dv_b = _masked_bwd(q_[i], k_[j], v_[j], lse_[i], do_[i], delta_[i], scale,
                                       _pair_mask(i, j, c, seg))
        return (dq.at[i].add(dq_b), dk.at[j].add(dk_b), dv.at[j].add(dv_b)), None

    zeros = tuple(jnp.zeros(x.shape, jnp.float32) for x in (q_, k_, v_))
    (dq, dk, dv), _ = jax.lax.scan(step, zeros, tuple(map(jnp.asarray, triangle(n))))
    return dq, dk, dv


def _bwd_batched(q, k, v, seg, scale, n, cot):
    """`_bwd_scan` with the pairs as one vmapped piece (planner counting mode)."""
    lse_, do_, delta_ = cot
    q_, k_, v_ = split_chunks(q, n), split_chunks(k, n), split_chunks(v, n)
    c = q_.shape[2]
    ii, jj = map(jnp.asarray, triangle(n))
    dq_P, dk_P, dv_P = jax.vmap(lambda i, j: _masked_bwd(q_[i], k_[j], v_[j], lse_[i], do_[i], delta_[i], scale,
                                                         _pair_mask(i, j, c, seg)))(ii, jj)
    add = lambda x, idx: jax.ops.segment_sum(x, idx, n)  # noqa: E731
    return add(dq_P, ii), add(dk_P, jj), add(dv_P, jj)


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5))
def _triangular(q, k, v, seg, scale, n):
    """o [B, T, H, V] in v's dtype of causal attention over the n(n+1)/2 visible block pairs."""
    return _triangular_fwd(q, k, v, seg, scale, n)[0]


def _triangular_fwd(q, k, v, seg, scale, n):
    fwd = _fwd_batched if planning.count_loops() else _fwd_scan
    o_n, lse_n = fwd(q, k, v, seg, scale, n)
    o = join_chunks(o_n).astype(v.dtype)
    return o, (q, k, v, seg, o, lse_n)


def _triangular_bwd(scale, n, res, do):
    q, k, v, seg, o, lse_n = res
    delta = jnp.sum(do.astype(jnp.float32) * o.astype(jnp.float32), axis=-1)  # [B, T, H]
    bwd = _bwd_batched if planning.count_loops() else _bwd_scan
    dq, dk, dv = bwd(q, k, v, seg, scale, n, (lse_n, split_chunks(do, n), split_chunks(delta, n)))
    dq, dk, dv = (join_chunks(g).astype(x.dtype) for g, x in zip((dq, dk, dv), (q, k, v)))
    return dq, dk, dv, None


_triangular.defvjp(_triangular_fwd, _triangular_bwd)


def causal_skip_attention(q_BTHK, k_BSHK, v_BSHV, *, scale: float, mask: AttentionMask = CAUSAL, chunk: int = CHUNK):
    """Causal self-attention over only the n(n+1)/2 visible blocks of `chunk` rows (module docstring); the kernel
    `attention_kernel='xla_causal_skip'`. Same maths as `xla_attention`; other layouts fall back to
    `chunked_attention` (recorded in kernel_paths, an error in strict mode)."""
    from composer2_jax.model.attention import chunked_attention

    reason = _refusal(q_BTHK.shape[1], k_BSHK.shape[1], mask, chunk)
    if reason is not None:
        kernel_paths.fallback("attention", "xla_chunked", f"causal block skipping refused: {reason}")
        return chunked_attention(q_BTHK, k_BSHK, v_BSHV, scale=scale, mask=mask, chunk=chunk)
    kernel_paths.record("attention", "xla_causal_skip")
    t = q_BTHK.shape[1]
    n = max(t // chunk, 1)
    seg = None
    if mask.q_segment_ids is not None:  # packing: query and key ids, blocked [n, B, c]
        seg = tuple(split_chunks(jnp.broadcast_to(ids, x.shape[:2]), n)
                    for ids, x in ((mask.q_segment_ids, q_BTHK), (mask.kv_segment_ids, k_BSHK)))
    return _triangular(q_BTHK, k_BSHK, v_BSHV, seg, float(scale), n)


def _refusal(t: int, s: int, mask: AttentionMask, chunk: int):
    """Why the triangular schedule does not apply to this call (None: it does)."""
    if not mask.causal:
        return "not causal: every key block is visible"
    if mask.has_indices:
        return "explicit query/key positions (e.g. a zigzag or context-parallel layout): block j ≤ i is not the " \
               "visible set"
    if t != s:
        return f"T = {t} query rows against S = {s} keys: not a self-attention square"
    if t > chunk and t % chunk:
        return f"T = {t} is not a multiple of the chunk {chunk}"
    if (mask.q_segment_ids is None) != (mask.kv_segment_ids is None):
        return "segment ids given for only one of queries and keys"
    return None
