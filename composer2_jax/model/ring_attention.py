"""Ring attention over the `context` mesh axis (Liu et al. 2023), zigzag-balanced, with MLA latent passing.

Each of the n devices on `context` holds T/n query rows and the matching key/value rows (layout: see
context_parallel.py). Key/value blocks travel around the ring; each device merges the block results through their
log-sum-exp, so per-device activation memory is O(T/n) (residuals: q, k, v or the latent, out, lse).

Forward, on device i (per shard, inside `jax.shard_map`):
  1. m = NEG_INF, l = 0, acc = 0: fp32 running max [B, T/n, H], denominator, unnormalised output [B, T/n, H, V].
  2. For step s = 0 … n−1 (the KV block held now came from device j = i − s mod n):
     a. if s < n−1, send the block (with its segment ids) on to device i+1 — no data dependence on b–c, so the
        ppermute overlaps the block compute;
     b. choose the visible part of the block from chunk indices (causal): s = 0 → the diagonal block, causal mask;
        zigzag, s ≥ 1 → q(both chunks)×kv(chunk j) if j < i (⇔ s ≤ i), else q(chunk 2n−1−i)×kv(both chunks) —
        half a block either way; contiguous, s ≥ 1 → the whole block if j < i, else nothing. The choice is a
        `lax.cond` on s ≤ i, so a fully masked block costs no matmul;
     c. latent mode: re-project the received latent with W_kvb into per-head k, v (only the rows used);
     d. (o_b, lse_b) = block kernel (kernels.py; lse_b fp32, checked);
        m' = max(m, lse_b); l ← l·e^(m−m') + e^(lse_b−m');
        acc ← acc·e^(m−m') + o_b·e^(lse_b−m'); m ← m'.
  3. out = acc / l, lse = m + log l.
Backward (`custom_vjp`, FlashAttention-2 style: every block uses the global out and lse, so the per-block
gradients add up exactly and no block needs the gradient of its own lse):
  1. delta = Σ_V dout·out; dq = 0; dsrc = 0 — the fp32 gradient accumulator of the KV block (dK, dV, or d latent),
     which travels with its block.
  2. For step s = 0 … n−1:
     a. if s < n−1, send the KV block on to device i+1 (overlaps b);
     b. same visible part as forward: (dq_b, dk_b, dv_b) = block backward; dq += dq_b; latent mode: pull dk_b, dv_b
        back through W_kvb into d(latent) and accumulate dW_kvb locally;
     c. dsrc ← ppermute(dsrc + dsrc_b) to device i+1. After the n-th send each accumulator is back with its owner.
  3. dW_kvb = psum over the axes W_kvb is replicated on (context and batch); cast to the input dtypes.

MLA latent mode passes c_kv and k_R (kv_lora_rank + rope dims = 576 values per token for Kimi K2) instead of the
expanded K and V (H·(N+R+V) = 20,480 values for 64 heads) and recomputes the up-projection on every step.

Mesh: `ring_attention(..., options=ContextOptions(placement))` runs over the placement's mesh it is given (never an
ambient one); with no mesh, or a context axis of size 1, the same code runs as one local block (the fused kernel on
GPU). Masking (causal flag, packing ids) comes as an `attention_mask.AttentionMask`, as for every attention kernel.
Inside the model select `model.attention_kernel = 'ring'` (expanded) or `'ring_latent'`: the layer passes its
`sharding.Placement` (mesh and rules); the model's inputs must then be in zigzag layout.
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from composer2_jax.model import context_parallel as cp
from composer2_jax.model.attention_mask import CAUSAL, AttentionMask
from composer2_jax.model.kernels import NEG_INF, BlockGrad, BlockKernel, check_lse, get_block_kernel
from composer2_jax.sharding import LOGICAL_RULES, Placement


class RingSpec(NamedTuple):
    """Static description of one ring call (hashable: it is a custom_vjp nondiff argument)."""

    n: int  # devices on the context axis
    causal: bool
    layout: str  # 'zigzag' | 'contiguous'
    scale: float
    kernel: BlockKernel
    latent: bool  # kv source is (c_kv, k_R) + W_kvb instead of (k, v)
    nope_dim: int  # latent mode: N, the no-rope part of the key head dim
    mesh: object  # Mesh / AbstractMesh, or None for the local (n = 1) path
    has_seg: bool
    # the logical rules of the shard_map specs (the layer's Placement.rules: inside a pipeline stage, the rules
    # without `stage`), kept here for the custom_vjp backward
    rules: tuple = LOGICAL_RULES


class Blk(NamedTuple):
    """The visible part of the KV block at one ring step: query rows × key rows; causal = diagonal block."""

    q: slice
    kv: slice
    causal: bool


# ----------------------------------------------------------------------------------------------- block schedule


def step_plan(spec: RingSpec, s: int, t_local: int) -> tuple[Optional[Blk], Optional[Blk]]:
    """(block if the source device j < i, block if j > i) at step s; equal entries need no cond."""
    every = slice(0, t_local)
    if not spec.causal:
        full = Blk(every, every, False)
        return full, full
    if s == 0:
        diag = Blk(every, every, True)
        return diag, diag
    if spec.layout == "zigzag":
        c = t_local // 2
        return Blk(every, slice(0, c), False), Blk(slice(c, t_local), every, False)
    return Blk(every, every, False), None


def _ring_ids(spec: RingSpec):
    """Each device's ring position as a sharded input [n] (one entry per shard).

    An input rather than `lax.axis_index`: under grad-of-scan, JAX 0.10's partial evaluation of shard_map otherwise
    splits off an operand-less manual computation that Shardy refuses to lower ("expected at least one operand …
    produced by a xla.sdy.GlobalToLocalShape") when no segment ids are passed.
    """
    return jnp.arange(spec.n, dtype=jnp.int32)


def _rotate(tree, n: int):
    """Send every leaf to the next device on the ring (i → i+1)."""
    perm = [(j, (j + 1) % n) for j in range(n)]
    return jax.tree.map(lambda a: jax.lax.ppermute(a, cp.CONTEXT_AXIS, perm), tree)


def _choose(spec: RingSpec, s: int, i, t_local: int, make, operand):
    """Run make(blk)(operand) for this step's visible block: static at s = 0, else lax.cond on s ≤ i."""
    earlier, later = step_plan(spec, s, t_local)
    if earlier == later:
        return make(earlier)(operand)
    return jax.lax.cond(s <= i, make(earlier), make(later), operand)


# ----------------------------------------------------------------------------------------------- kv source


def _kv(spec: RingSpec, src, w_LHX, rows: slice):
    """Per-head keys and values of some rows of the KV block (latent mode: re-projected with W_kvb)."""
    if spec.latent:
        ckv_BSL, kr_BSR = src
        return cp.expand_latent(ckv_BSL[:, rows], kr_BSR[:, rows], w_LHX, spec.nope_dim)
    k_BSHK, v_BSHV = src
    return k_BSHK[:, rows], v_BSHV[:, rows]


def _pull_back(spec: RingSpec, src, w_LHX, rows: slice, dk_BSHK, dv_BSHV):
    """Block gradients in the source's terms: (dk, dv), or (d c_kv, d k_R) plus this block's dW_kvb."""
    if not spec.latent:
        return (dk_BSHK, dv_BSHV), None
    n = spec.nope_dim
    dkv_BSHX = jnp.concatenate([dk_BSHK[..., :n], dv_BSHV], axis=-1)
    w32_LHX = w_LHX.astype(jnp.float32)
    dckv_BSL = jnp.einsum("BSHX,LHX->BSL", dkv_BSHX, w32_LHX)
    dkr_BSR = jnp.sum(dk_BSHK[..., n:], axis=2)
    dw_LHX = jnp.einsum("BSL,BSHX->LHX", src[0][:, rows].astype(jnp.float32), dkv_BSHX)
    return (dckv_BSL, dkr_BSR), dw_LHX


def _segs(q_seg, kv_seg, blk: Blk):
    """Segment ids of the block's query and key rows (None, None without packing)."""
    if q_seg is None:
        return None, None
    return q_seg[:, blk.q], kv_seg[:, blk.kv]


# ----------------------------------------------------------------------------------------------- forward


def _merge(state, o_BTHV, lse_BTH, rows: slice):
    """Online-softmax update of (m, l, acc) on `rows` with one block's normalised output and lse."""
    m, l, acc = state
    m_r = m[:, rows]
    m_new = jnp.maximum(m_r, lse_BTH)
    a, c = jnp.exp(m_r - m_new), jnp.exp(lse_BTH - m_new)
    l_r = l[:, rows] * a + c
    acc_r = acc[:, rows] * a[..., None] + o_BTHV * c[..., None]
    return m.at[:, rows].set(m_new), l.at[:, rows].set(l_r), acc.at[:, rows].set(acc_r)


def _fwd_block(spec: RingSpec, q_, kv, q_seg, w_, blk: Optional[Blk]):
    """A function state → state that attends the visible block and merges it (identity when skipped)."""

    def run(state):
        if blk is None:
            return state
        src, kv_seg = kv
        k_BSHK, v_BSHV = _kv(spec, src, w_, blk.kv)
        o_BTHV, lse_BTH = spec.kernel.fwd(q_[:, blk.q], k_BSHK, v_BSHV, spec.scale, blk.causal,
                                          *_segs(q_seg, kv_seg, blk))
        return _merge(state, o_BTHV, check_lse(lse_BTH, spec.kernel.name), blk.q)

    return run


def _fwd_shard(spec: RingSpec, ring_id_, q_, src_, segs_, *w):
    """Forward on one device: (out [B, T/n, H, V] in q's dtype, lse [B, T/n, H] fp32)."""
    w_, i = (w[0] if w else None), ring_id_[0]
    q_seg, kv_seg = segs_ if spec.has_seg else (None, None)
    b, t, h, _ = q_.shape
    vdim = w_.shape[-1] - spec.nope_dim if spec.latent else src_[1].shape[-1]
    state = (jnp.full((b, t, h), NEG_INF, jnp.float32), jnp.zeros((b, t, h), jnp.float32),
             jnp.zeros((b, t, h, vdim), jnp.float32))
    kv = (src_, kv_seg)
    for s in range(spec.n):
        nxt = _rotate(kv, spec.n) if s < spec.n - 1 else None
        with jax.named_scope(f"ring_fwd_step{s}"):
            state = _choose(spec, s, i, t, lambda blk, kv=kv: _fwd_block(spec, q_, kv, q_seg, w_, blk), state)
        kv = nxt
    m, l, acc = state
    return (acc / l[..., None]).astype(q_.dtype), m + jnp.log(l)


# ----------------------------------------------------------------------------------------------- backward


def _bwd_block(spec: RingSpec, q_, kv, q_seg, w_, cot: BlockGrad, blk: Optional[Blk]):
    """A function (dq, dw) → (dq, dw, dsrc_b): the visible block's gradients (zeros when skipped); cot holds the
    device's whole rows of (out, lse, dout, delta)."""

    def run(carry):
        dq, dw = carry
        src, kv_seg = kv
        dsrc_b = jax.tree.map(lambda a: _vary(spec, jnp.zeros_like(a, jnp.float32)), src)
        if blk is None:
            return dq, dw, dsrc_b
        k_BSHK, v_BSHV = _kv(spec, src, w_, blk.kv)
        r = blk.q
        res = BlockGrad(*(a[:, r] for a in cot))
        dq_b, dk_b, dv_b = spec.kernel.bwd(q_[:, r], k_BSHK, v_BSHV, res, spec.scale, blk.causal,
                                           *_segs(q_seg, kv_seg, blk))
        grads, dw_b = _pull_back(spec, src, w_, blk.kv, dk_b, dv_b)
        dsrc_b = jax.tree.map(lambda z, g: z.at[:, blk.kv].set(g), dsrc_b, grads)
        return dq.at[:, r].add(dq_b), (dw if dw_b is None else dw + dw_b), dsrc_b

    return run


def _bwd_shard(spec: RingSpec, ring_id_, q_, src_, segs_, res_, *w):
    """Backward on one device from res_ = (out, lse, dout): dq, d(source) (returned to its owner), and dW_kvb in
    latent mode."""
    w_, i = (w[0] if w else None), ring_id_[0]
    out_, lse_, do_ = res_
    q_seg, kv_seg = segs_ if spec.has_seg else (None, None)
    t = q_.shape[1]
    delta_ = jnp.sum(do_.astype(jnp.float32) * out_.astype(jnp.float32), axis=-1)  # [B, T/n, H]
    cot = BlockGrad(out_, lse_, do_, delta_)
    dq = jnp.zeros(q_.shape, jnp.float32)
    dw = jnp.zeros(w_.shape, jnp.float32) if spec.latent else jnp.zeros((), jnp.float32)
    dsrc = jax.tree.map(lambda a: jnp.zeros(a.shape, jnp.float32), src_)
    kv = (src_, kv_seg)
    for s in range(spec.n):
        nxt = _rotate(kv, spec.n) if s < spec.n - 1 else None
        with jax.named_scope(f"ring_bwd_step{s}"):
            make = lambda blk, kv=kv: _bwd_block(spec, q_, kv, q_seg, w_, cot, blk)  # noqa: E731
            dq, dw, dsrc_b = _choose(spec, s, i, t, make, (dq, dw))
        dsrc = jax.tree.map(jnp.add, dsrc, dsrc_b)
        if spec.n > 1:
            dsrc = _rotate(dsrc, spec.n)  # travels with its block; the n-th send brings it home
        kv = nxt
    if not spec.latent:
        return dq.astype(q_.dtype), jax.tree.map(lambda g, a: g.astype(a.dtype), dsrc, src_)
    dsrc, dw = _psum_latent_grads(spec, dsrc, dw)
    return dq.astype(q_.dtype), jax.tree.map(lambda g, a: g.astype(a.dtype), dsrc, src_), dw.astype(w_.dtype)


def _head_axes(spec: RingSpec) -> tuple[str, ...]:
    """Mesh axes that split the heads but not the latent: d(latent) is a partial sum over them."""
    if not spec.latent or spec.n == 1:
        return ()
    mesh = spec.mesh
    latent_rep = set(cp.replicated_axes(mesh, cp.spec_for(mesh, cp.LATENT_BTL, spec.rules)))
    heads_rep = set(cp.replicated_axes(mesh, cp.spec_for(mesh, cp.HEADS_BTHK, spec.rules)))
    return tuple(a for a in mesh.axis_names if a in latent_rep and a not in heads_rep)


def _vary(spec: RingSpec, zeros):
    """Zeros of a skipped block typed like a computed block's gradient (varying over the head axes too)."""
    axes = _head_axes(spec)
    return jax.lax.pcast(zeros, axes, to="varying") if axes else zeros


def _psum_latent_grads(spec: RingSpec, dsrc, dw):
    """Latent mode: d(latent) sums over heads (psum over the head axes), dW_kvb over its replicated axes."""
    if spec.n == 1:
        return dsrc, dw
    axes = _head_axes(spec)
    if axes:
        dsrc = jax.tree.map(lambda g: jax.lax.psum(g, axes), dsrc)
    return dsrc, jax.lax.psum(dw, _weight_sum_axes(spec.mesh, spec.rules))


def _weight_sum_axes(mesh, rules: tuple = LOGICAL_RULES) -> tuple[str, ...]:
    """Mesh axes dW_kvb is a partial sum over: those its spec replicates it over that split an input (the batch,
    the sequence or the heads). An axis no input names (e.g. `stage` around a ring inside one pipeline stage) sees
    the same inputs on every device, so each already holds the whole gradient."""
    inputs = (cp.HEADS_BTHK, cp.LATENT_BTL, cp.TOKENS_BT)
    split = {a for spec in (cp.spec_for(mesh, x, rules) for x in inputs) for e in spec
             for a in ((e,) if isinstance(e, str) else (e or ()))}
    return tuple(a for a in cp.replicated_axes(mesh, cp.spec_for(mesh, cp.WEIGHT_LHX, rules)) if a in split)


# ----------------------------------------------------------------------------------------------- custom_vjp


def _specs(spec: RingSpec):
    """shard_map specs: (q, src, segs, w) inputs and the out/lse/dsrc/dw outputs."""
    mesh = spec.mesh
    heads, tok, lse = (cp.spec_for(mesh, a, spec.rules) for a in (cp.HEADS_BTHK, cp.TOKENS_BT, cp.LSE_BTH))
    src = (cp.spec_for(mesh, cp.LATENT_BTL, spec.rules),) * 2 if spec.latent else (heads, heads)
    segs = (tok, tok) if spec.has_seg else ()
    w = (cp.spec_for(mesh, cp.WEIGHT_LHX, spec.rules),) if spec.latent else ()
    return dict(heads=heads, lse=lse, src=src, segs=segs, w=w)


def _sharded(spec: RingSpec, fn, in_specs, out_specs):
    """`fn` per shard under shard_map on the ring's mesh.

    Inside a pipeline stage the ring runs under `jax.vmap(spmd_axis_name='stage')` (model/pipeline.py): the
    batched inputs then vary over `stage` and the unbatched ones (the ring ids, the iota masks) do not, which JAX
    0.10's varying-axes check refuses in their elementwise ops ("Primitive and requires varying manual axes to
    match"), so the check is off on a mesh with stage > 1, as for the MoE shard_map (model/expert_parallel.py).
    The ring needs no inferred psum: its backward is the custom VJP's own shard_map with explicit collectives."""
    check_vma = dict(spec.mesh.shape).get("stage", 1) == 1
    return jax.shard_map(functools.partial(fn, spec), mesh=spec.mesh, in_specs=in_specs, out_specs=out_specs,
                         check_vma=check_vma)


def _run_fwd(spec: RingSpec, q, src, segs, w):
    """Global (out, lse) of the ring forward."""
    if spec.n == 1:
        return _fwd_shard(spec, jnp.zeros((1,), jnp.int32), q, src, segs, *w)
    sp = _specs(spec)
    f = _sharded(spec, _fwd_shard, (P(cp.CONTEXT_AXIS), sp["heads"], sp["src"], sp["segs"], *sp["w"]),
                 (sp["heads"], sp["lse"]))
    return f(_ring_ids(spec), q, src, segs, *w)


def _run_bwd(spec: RingSpec, q, src, segs, w, out, lse, dout):
    """Global (dq, dsrc[, dw]) of the ring backward."""
    if spec.n == 1:
        return _bwd_shard(spec, jnp.zeros((1,), jnp.int32), q, src, segs, (out, lse, dout), *w)
    sp = _specs(spec)
    outs = (sp["heads"], sp["src"], *sp["w"])
    f = _sharded(spec, _bwd_shard, (P(cp.CONTEXT_AXIS), sp["heads"], sp["src"], sp["segs"],
                                    (sp["heads"], sp["lse"], sp["heads"]), *sp["w"]), outs)
    return f(_ring_ids(spec), q, src, segs, (out, lse, dout), *w)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _ring(spec: RingSpec, q, src, segs, w):
    """Ring attention output [B, T, H, V] (w = () or (W_kvb,))."""
    return _run_fwd(spec, q, src, segs, w)[0]


def _ring_fwd(spec: RingSpec, q, src, segs, w):
    out, lse = _run_fwd(spec, q, src, segs, w)
    return out, (q, src, segs, w, out, lse)  # O(T/n) per device: inputs, output, lse


def _ring_bwd(spec: RingSpec, res, dout):
    q, src, segs, w, out, lse = res
    grads = _run_bwd(spec, q, src, segs, w, out, lse, dout)
    dq, dsrc = grads[0], grads[1]
    dw = (grads[2],) if spec.latent else ()
    return dq, dsrc, tuple(None for _ in segs), dw


_ring.defvjp(_ring_fwd, _ring_bwd)


# ----------------------------------------------------------------------------------------------- public API


def _make_spec(q_BTHK, src, w_LHX, *, scale: Optional[float], mask: AttentionMask,
               options: cp.ContextOptions) -> RingSpec:
    """Validate shapes against the mesh and build the static spec (latent mode iff W_kvb = w_LHX is given)."""
    latent = w_LHX is not None
    nope = q_BTHK.shape[-1] - src[1].shape[-1] if latent else 0
    if latent and (w_LHX.shape[0] != src[0].shape[-1] or w_LHX.shape[-1] <= nope):
        raise ValueError(f"W_kvb {w_LHX.shape} does not match c_kv rank {src[0].shape[-1]} and nope dim {nope}")
    mesh = options.placement.mesh
    n = cp.context_size(mesh)
    b, t = q_BTHK.shape[:2]
    cp.check_length(t, n, options.layout)
    for name, a in zip(("c_kv", "k_R") if latent else ("keys", "values"), src):
        if a.shape[:2] != (b, t):
            raise ValueError(f"ring attention is self-attention: {name} [B, S] = {a.shape[:2]} must equal the "
                             f"queries' [B, T] = {(b, t)}")
    cp._reject_indices(mask.q_idx, mask.kv_idx)
    has_seg = cp._check_segments(mask.q_segment_ids, mask.kv_segment_ids)
    spec = RingSpec(n, mask.causal, options.layout, float(q_BTHK.shape[-1] ** -0.5 if scale is None else scale),
                    get_block_kernel(options.block_kernel), latent, nope, mesh if n > 1 else None, has_seg,
                    tuple(options.placement.rules))
    if n > 1:
        heads = cp.spec_for(mesh, cp.HEADS_BTHK, spec.rules)
        cp.check_specs(mesh, {"ring attention queries [B, T, H, K]": (q_BTHK.shape, heads)})
    return spec


def _segments(spec: RingSpec, mask: AttentionMask) -> tuple:
    """The (query, key) packing ids the ring passes around ((), without packing)."""
    return (mask.q_segment_ids, mask.kv_segment_ids) if spec.has_seg else ()


def ring_attention(q_BTHK, k_BSHK, v_BSHV, *, scale: Optional[float] = None, mask: AttentionMask = CAUSAL,
                   options: cp.ContextOptions = cp.ContextOptions()):
    """Ring attention with expanded K and V passed around the `context` axis.

    Args:
      q_BTHK, k_BSHK, v_BSHV: global arrays in `options.layout` order (T = S), sharded or not; shard_map reshards
        them to (batch axes, 'context', 'tensor', None) from the placement's rules.
      scale: softmax scale (default K^-1/2).
      mask: causal masking by global token order; [B, T] packing ids in the same layout (both or neither), no
        attention across segments; no explicit positions (the layout gives them).
      options: placement (a mesh with a `context` axis, None: one local block; the rules of the shard_map specs),
        layout ('zigzag' balanced, or 'contiguous') and block_kernel ('auto' | 'xla' | 'cudnn' | 'splash').
    Returns:
      [B, T, H, V] in q's dtype and in `options.layout` order.
    """
    src = (k_BSHK, v_BSHV)
    spec = _make_spec(q_BTHK, src, None, scale=scale, mask=mask, options=options)
    return _ring(spec, q_BTHK, src, _segments(spec, mask), ())


def ring_mla_attention(q_BTHK, ckv_BSL, kr_BSR, w_LHX, *, scale: Optional[float] = None,
                       mask: AttentionMask = CAUSAL, options: cp.ContextOptions = cp.ContextOptions()):
    """Ring attention passing the MLA latent (c_kv [B, S, L], roped k_R [B, S, R]) and re-projecting each block.

    w_LHX is W_kvb [L, H, N+V]; keys are [W_kvb·c_kv]_N ‖ k_R (k_R shared by all heads), values [W_kvb·c_kv]_V, with
    N = K − R read from the shapes. Gradients flow to q, c_kv, k_R and W_kvb. Other arguments as `ring_attention`.
    """
    src = (ckv_BSL, kr_BSR)
    spec = _make_spec(q_BTHK, src, w_LHX, scale=scale, mask=mask, options=options)
    return _ring(spec, q_BTHK, src, _segments(spec, mask), (w_LHX,))


def device_work(i: int, q_, k_nBSHK, v_nBSHV, do_, *, scale: Optional[float] = None, mask: AttentionMask = CAUSAL,
                options: cp.ContextOptions = cp.ContextOptions()):
    """Device i's share of an n-device ring, forward and backward, with the communication removed (benchmarks).

    The same visible blocks, block kernels, merges and gradient accumulation as device i of `ring_attention`;
    k_nBSHK / v_nBSHV stack the n KV blocks the device would receive (step s holds block s: distinct blocks, so
    XLA cannot merge the steps; n is their leading size). mask: only `causal` (no packing, no positions); options:
    layout and block_kernel (no mesh: nothing is sent). Returns (out, dq, dk_n, dv_n).
    """
    n = k_nBSHK.shape[0]
    if v_nBSHV.shape[0] != n or not 0 <= i < n:
        raise ValueError(f"device_work: device i={i} of n={n} KV blocks (keys {k_nBSHK.shape[0]}, values "
                         f"{v_nBSHV.shape[0]}): expected equal block counts and 0 <= i < n")
    if mask.q_segment_ids is not None or mask.kv_segment_ids is not None or mask.has_indices:
        raise ValueError("device_work models an unpacked ring: the mask must carry no segment ids or positions")
    spec = RingSpec(n, mask.causal, options.layout, float(q_.shape[-1] ** -0.5 if scale is None else scale),
                    get_block_kernel(options.block_kernel), False, 0, None, False)
    b, t, h, _ = q_.shape
    kv = [((k_nBSHK[s], v_nBSHV[s]), None) for s in range(n)]
    pick = lambda s: step_plan(spec, s, t)[0 if s <= i else 1]  # noqa: E731 — i is static here
    state = (jnp.full((b, t, h), NEG_INF, jnp.float32), jnp.zeros((b, t, h), jnp.float32),
             jnp.zeros((b, t, h, v_nBSHV.shape[-1]), jnp.float32))
    for s in range(n):
        state = _fwd_block(spec, q_, kv[s], None, None, pick(s))(state)
    m, l, acc = state
    out_, lse_ = (acc / l[..., None]).astype(q_.dtype), m + jnp.log(l)
    cot = BlockGrad(out_, lse_, do_, jnp.sum(do_.astype(jnp.float32) * out_.astype(jnp.float32), axis=-1))
    dq, dw, dk, dv = jnp.zeros(q_.shape, jnp.float32), jnp.zeros((), jnp.float32), [], []
    for s in range(n):
        dq, dw, (dk_s, dv_s) = _bwd_block(spec, q_, kv[s], None, None, cot, pick(s))((dq, dw))
        dk.append(dk_s)
        dv.append(dv_s)
    return out_, dq, jnp.stack(dk), jnp.stack(dv)


# ----------------------------------------------------------------------------------------------- model kernels


def ring_kernel(q_BTHK, k_BSHK, v_BSHV, *, scale: float, mask: AttentionMask = CAUSAL,
                placement: Placement = Placement()):
    """Model kernel 'ring': ring attention over the `context` axis of the placement's mesh, inputs in zigzag
    layout."""
    if mask.has_indices:
        if cp.context_size(placement.mesh) > 1:
            cp._reject_indices(mask.q_idx, mask.kv_idx)
        from composer2_jax.model.attention import (
            xla_attention,  # lazy: attention.py imports this module
        )

        return xla_attention(q_BTHK, k_BSHK, v_BSHV, scale=scale, mask=mask)
    return ring_attention(q_BTHK, k_BSHK, v_BSHV, scale=scale, mask=mask, options=cp.ContextOptions(placement))


ring_kernel.takes_placement = True  # MLAttention passes its placement= (the mesh and rules the ring runs on)


def ring_latent_kernel(q_BTHK, ckv_BSL, kr_BSR, w_LHX, *, scale: float, mask: AttentionMask = CAUSAL,
                       placement: Placement = Placement()):
    """Model kernel 'ring_latent': ring attention passing the MLA latent, inputs in zigzag layout."""
    return ring_mla_attention(q_BTHK, ckv_BSL, kr_BSR, w_LHX, scale=scale, mask=mask,
                              options=cp.ContextOptions(placement))


ring_latent_kernel.takes_latent = True  # MLAttention passes (q, c_kv, k_R, W_kvb) instead of (q, k, v)
ring_latent_kernel.takes_placement = True
