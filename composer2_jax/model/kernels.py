"""Block attention kernels for the ring: one (query block, key block) pair at a time, merged through the LSE.

Every kernel exposes the same two functions (shapes per block; all fp32 results):
  fwd(q_BTHK, k_BSHK, v_BSHV, scale, causal, q_seg_BT, kv_seg_BS) -> (o_BTHV, lse_BTH)
      o is the block's normalised output, lse = log Σ_s exp(q·k_s·scale) over the visible keys (NEG_INF where a
      row sees no key). Two blocks merge exactly: lse = logaddexp(lse₁, lse₂), o = Σᵢ exp(lseᵢ − lse)·oᵢ.
  bwd(q, k, v, res, scale, causal, q_seg, kv_seg) -> (dq_BTHK, dk_BSHK, dv_BSHV), res = `BlockGrad(o, lse, do,
      delta)`: the block's share of the gradient given the FINAL output o, its lse and delta = Σ_V do·o
      (FlashAttention-2 backward, Dao 2023 alg. 2): P = exp(s − lse), dV = Pᵀ·dO, dS = P ∘ (dO·Vᵀ − delta),
      dQ = dS·K·scale, dK = dSᵀ·Q·scale. Using the global (o, lse) makes the per-block gradients sum to the exact
      gradient, so the ring never needs the gradient of a block's own lse.
`causal=True` means the two blocks hold the same token range (a diagonal block): key s is visible to query t iff
s ≤ t. Off-diagonal blocks are either fully visible or skipped by the ring, so no kernel needs positions.

Kernels: 'xla' (CPU/TPU default; masks by arithmetic, so a diagonal block computes its masked half too),
'xla_chunked' (the same, CHUNK query rows at a time under a rematerialised scan: O(CHUNK·S) memory per block),
'cudnn' (GPU: cuDNN flash attention with fp32 softmax stats, v padded to the qk head dim; backward fused with the
global o/lse), 'splash' (TPU Pallas splash attention forward when importable, XLA backward).
`get_block_kernel('auto')` picks by backend. Every fallback (cuDNN or splash unable to run, jax's private cuDNN
module moved, the fused backward refused) is recorded in kernel_paths.py and is an error in strict mode; the LSE a
block returns is fp32 on every path (`check_lse`).
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from composer2_jax.model import kernel_paths, planning

NEG_INF = -1e30  # finite: exp(NEG_INF − m) underflows to 0 without inf − inf = NaN


class BlockGrad(NamedTuple):
    """What a block backward reads besides q, k, v: the final output and softmax stats, and the output cotangent."""

    o: jax.Array  # [B, T, H, V] the FINAL (merged) attention output
    lse: jax.Array  # [B, T, H] fp32 its log-sum-exp
    do: jax.Array  # [B, T, H, V] the output cotangent
    delta: jax.Array  # [B, T, H] fp32 Σ_V do·o


class BlockKernel(NamedTuple):
    """A named pair of block functions (see the module docstring for their contract)."""

    name: str
    fwd: Callable
    bwd: Callable


def block_mask(t: int, s: int, causal: bool, q_seg_BT=None, kv_seg_BS=None):
    """Boolean [B|1, 1, T, S] visibility of a block (None when everything is visible)."""
    mask = None
    if causal:
        if t != s:
            raise ValueError(f"a causal (diagonal) block needs equal query and key lengths, got T={t}, S={s}")
        mask = jnp.tril(jnp.ones((t, s), bool))[None, None]
    if q_seg_BT is not None:
        seg = (q_seg_BT[:, :, None] == kv_seg_BS[:, None, :])[:, None]
        mask = seg if mask is None else mask & seg
    return mask


def _logits(q_BTHK, k_BSHK, scale, mask):
    """fp32 scaled logits [B, H, T, S] with masked entries at NEG_INF."""
    s_BHTS = jnp.einsum("BTHK,BSHK->BHTS", q_BTHK, k_BSHK, preferred_element_type=jnp.float32) * scale
    return s_BHTS if mask is None else jnp.where(mask, s_BHTS, NEG_INF)


def _masked_fwd(q_BTHK, k_BSHK, v_BSHV, scale, mask):
    """(o [B, T, H, V], lse [B, T, H]) fp32 of one block under a [B|1, 1, T, S] mask (None: all visible)."""
    s_BHTS = _logits(q_BTHK, k_BSHK, scale, mask)
    m_BHT = jnp.max(s_BHTS, axis=-1)
    p_BHTS = jnp.exp(s_BHTS - m_BHT[..., None])
    if mask is not None:
        p_BHTS = jnp.where(mask, p_BHTS, 0.0)
    l_BHT = jnp.sum(p_BHTS, axis=-1)
    empty = l_BHT == 0.0  # a row with no visible key in this block (packing)
    l_BHT = jnp.where(empty, 1.0, l_BHT)
    o_BTHV = jnp.einsum("BHTS,BSHV->BTHV", p_BHTS.astype(v_BSHV.dtype), v_BSHV, preferred_element_type=jnp.float32)
    o_BTHV = o_BTHV / jnp.swapaxes(l_BHT, 1, 2)[..., None]
    lse_BHT = jnp.where(empty, NEG_INF, m_BHT + jnp.log(l_BHT))
    return o_BTHV, jnp.swapaxes(lse_BHT, 1, 2)


def _masked_bwd(q_BTHK, k_BSHK, v_BSHV, lse_BTH, do_BTHV, delta_BTH, scale, mask):
    """FA-2 block backward (module docstring) from the final lse and delta: fp32 (dq, dk, dv)."""
    p_BHTS = jnp.exp(_logits(q_BTHK, k_BSHK, scale, mask) - jnp.swapaxes(lse_BTH, 1, 2)[..., None])
    if mask is not None:
        p_BHTS = jnp.where(mask, p_BHTS, 0.0)
    dv_BSHV = jnp.einsum("BHTS,BTHV->BSHV", p_BHTS.astype(do_BTHV.dtype), do_BTHV, preferred_element_type=jnp.float32)
    dp_BHTS = jnp.einsum("BTHV,BSHV->BHTS", do_BTHV, v_BSHV, preferred_element_type=jnp.float32)
    ds_BHTS = p_BHTS * (dp_BHTS - jnp.swapaxes(delta_BTH, 1, 2)[..., None]) * scale
    dq_BTHK = jnp.einsum("BHTS,BSHK->BTHK", ds_BHTS.astype(k_BSHK.dtype), k_BSHK, preferred_element_type=jnp.float32)
    dk_BSHK = jnp.einsum("BHTS,BTHK->BSHK", ds_BHTS.astype(q_BTHK.dtype), q_BTHK, preferred_element_type=jnp.float32)
    return dq_BTHK, dk_BSHK, dv_BSHV


def check_lse(lse_BTH, kernel: str):
    """The LSE a ring merges must be fp32: a bf16 one is off by ~0.03 near 10, enough to skew the merge weights."""
    if lse_BTH.dtype != jnp.float32:
        raise TypeError(f"block kernel {kernel!r} returned an LSE of dtype {lse_BTH.dtype}; the ring merges "
                        f"fp32 log-sum-exps only")
    return lse_BTH


def _xla_fwd(q_BTHK, k_BSHK, v_BSHV, scale, causal, q_seg_BT=None, kv_seg_BS=None):
    mask = block_mask(q_BTHK.shape[1], k_BSHK.shape[1], causal, q_seg_BT, kv_seg_BS)
    return _masked_fwd(q_BTHK, k_BSHK, v_BSHV, scale, mask)


def _xla_bwd(q_BTHK, k_BSHK, v_BSHV, res: BlockGrad, scale, causal, q_seg_BT=None, kv_seg_BS=None):
    mask = block_mask(q_BTHK.shape[1], k_BSHK.shape[1], causal, q_seg_BT, kv_seg_BS)
    return _masked_bwd(q_BTHK, k_BSHK, v_BSHV, res.lse, res.do, res.delta, scale, mask)


def xla_fwd(q_BTHK, k_BSHK, v_BSHV, scale, causal, q_seg_BT=None, kv_seg_BS=None):
    """Block forward in plain XLA: (o [B, T, H, V] fp32, lse [B, T, H] fp32)."""
    kernel_paths.record("block_fwd", "xla")
    return _xla_fwd(q_BTHK, k_BSHK, v_BSHV, scale, causal, q_seg_BT, kv_seg_BS)


def xla_bwd(q_BTHK, k_BSHK, v_BSHV, res: BlockGrad, scale, causal, q_seg_BT=None, kv_seg_BS=None):
    """Block backward in plain XLA from the final (o, lse) (o enters through delta): fp32 (dq, dk, dv)."""
    kernel_paths.record("block_bwd", "xla")
    return _xla_bwd(q_BTHK, k_BSHK, v_BSHV, res, scale, causal, q_seg_BT, kv_seg_BS)


XLA = BlockKernel("xla", xla_fwd, xla_bwd)


# ----------------------------------------------------------------------------------------------- cuDNN (GPU)


def _pad_v(v_BSHV, width: int):
    """Zero-pad the value head dim to the qk head dim (JAX refuses unequal qk/v head dims for cuDNN)."""
    extra = width - v_BSHV.shape[-1]
    return v_BSHV if extra == 0 else jnp.pad(v_BSHV, ((0, 0), (0, 0), (0, 0), (0, extra)))


def cudnn_refusal(q_BTHK) -> Optional[str]:
    """Why cuDNN flash attention cannot run this block (None: it can): GPU, fp16/bf16, head dim ≤ 256 and % 8."""
    k, backend = q_BTHK.shape[-1], jax.default_backend()
    if backend != "gpu":
        return f"backend is {backend!r}, cuDNN needs 'gpu'"
    if q_BTHK.dtype not in (jnp.bfloat16, jnp.float16):
        return f"dtype {q_BTHK.dtype}, cuDNN needs bfloat16 or float16"
    if k > 256 or k % 8:
        return f"head dim {k}, cuDNN needs a multiple of 8 that is at most 256"
    return None


def _cudnn_module():
    """jax's cuDNN fused-attention module (private: it returns the fp32 softmax stats the public API casts)."""
    from jax._src.cudnn import fused_attention_stablehlo as fa

    return fa


def cudnn_fwd(q_BTHK, k_BSHK, v_BSHV, scale, causal, q_seg_BT=None, kv_seg_BS=None):
    """Block forward with cuDNN flash attention: (o fp32, lse fp32); XLA where cuDNN cannot run (a recorded
    fallback, kernel_paths.py)."""
    refusal = cudnn_refusal(q_BTHK)
    if refusal:
        kernel_paths.fallback("block_fwd", "xla", refusal)
        return _xla_fwd(q_BTHK, k_BSHK, v_BSHV, scale, causal, q_seg_BT, kv_seg_BS)
    vdim = v_BSHV.shape[-1]
    v_pad = _pad_v(v_BSHV, q_BTHK.shape[-1])
    seg_mask = None if q_seg_BT is None else block_mask(q_BTHK.shape[1], k_BSHK.shape[1], False, q_seg_BT, kv_seg_BS)
    try:  # fp32 stats [B, H, T] from the module jax.nn.dot_product_attention(implementation='cudnn') calls
        fa = _cudnn_module()
        o_BTHV, lse_BHT = fa.dot_product_attention(
            q_BTHK, k_BSHK, v_pad, mask=seg_mask, scale=scale,
            mask_type=fa.MaskType.CAUSAL if causal else fa.MaskType.NO_MASK, return_residual=True)
        if lse_BHT.dtype != jnp.float32:
            kernel_paths.fallback("block_fwd", "cudnn_low_precision_lse", f"cuDNN stats came back in {lse_BHT.dtype}")
        else:
            kernel_paths.record("block_fwd", "cudnn")
        lse_BTH = jnp.swapaxes(lse_BHT.astype(jnp.float32), 1, 2)
    except (ImportError, AttributeError, TypeError) as e:  # public API: the residual comes back in the input dtype
        kernel_paths.fallback("block_fwd", "cudnn_public_api",
                              f"jax's private cuDNN module refused ({type(e).__name__}: {e}); the public API returns "
                              f"the LSE in {q_BTHK.dtype}")
        o_BTHV, lse_BTH = jax.nn.dot_product_attention(q_BTHK, k_BSHK, v_pad, mask=seg_mask, scale=scale,
                                                       is_causal=causal, implementation="cudnn",
                                                       return_residual=True)
        lse_BTH = lse_BTH.astype(jnp.float32)
    if seg_mask is not None:  # rows with no visible key: cuDNN's stats are not NEG_INF there
        lse_BTH = jnp.where(jnp.any(seg_mask, axis=-1)[:, 0, :, None], lse_BTH, NEG_INF)
    return o_BTHV[..., :vdim].astype(jnp.float32), lse_BTH


def cudnn_bwd(q_BTHK, k_BSHK, v_BSHV, res: BlockGrad, scale, causal, q_seg_BT=None, kv_seg_BS=None):
    """Block backward with cuDNN's fused kernel fed the global (o, lse); the XLA formula where it cannot run (a
    recorded fallback, kernel_paths.py)."""
    refusal = cudnn_refusal(q_BTHK)
    if refusal:
        kernel_paths.fallback("block_bwd", "xla", refusal)
        return _xla_bwd(q_BTHK, k_BSHK, v_BSHV, res, scale, causal, q_seg_BT, kv_seg_BS)
    try:
        grads = _cudnn_fused_bwd(q_BTHK, k_BSHK, v_BSHV, res, scale, causal, q_seg_BT, kv_seg_BS)
    except (ImportError, AttributeError, TypeError, ValueError) as e:  # private API moved: recompute in XLA
        kernel_paths.fallback("block_bwd", "xla_recompute",
                              f"cuDNN's fused backward refused at trace time ({type(e).__name__}: {e})")
        return _xla_bwd(q_BTHK, k_BSHK, v_BSHV, res, scale, causal, q_seg_BT, kv_seg_BS)
    kernel_paths.record("block_bwd", "cudnn")
    return grads


def _cudnn_fused_bwd(q_BTHK, k_BSHK, v_BSHV, res: BlockGrad, scale, causal, q_seg_BT, kv_seg_BS):
    """cuDNN's backward rule called with the ring's global output and softmax stats as its residuals (delta is
    recomputed by cuDNN)."""
    o_BTHV, lse_BTH, do_BTHV = res.o, res.lse, res.do
    fa = _cudnn_module()
    width, vdim = q_BTHK.shape[-1], v_BSHV.shape[-1]
    v_pad, o_pad, do_pad = (_pad_v(a.astype(q_BTHK.dtype), width) for a in (v_BSHV, o_BTHV, do_BTHV))
    bias = None
    if q_seg_BT is not None:  # a boolean mask, as a constant bias: no bias gradient is asked for (cuDNN refuses
        mask = block_mask(q_BTHK.shape[1], k_BSHK.shape[1], False, q_seg_BT, kv_seg_BS)  # a [B, 1, T, S] dbias)
        bias = fa.combine_bias_and_mask(None, mask, q_BTHK.dtype)
    unused = jnp.zeros(0, q_BTHK.dtype)
    res = (q_BTHK, k_BSHK, v_pad, unused if bias is None else bias, unused, unused, unused, unused, unused, unused,
           jnp.swapaxes(lse_BTH, 1, 2), o_pad)
    mask_type = fa.MaskType.CAUSAL if causal else fa.MaskType.NO_MASK
    grads = fa._dot_product_attention_bwd_rule(  # (scale, seed, dropout, (has_bias, has_dbias), mask_type, layout,
        scale, 42, 0.0, (bias is not None, False), mask_type, fa.AttentionLayout.BTNH.value, None,
        True, False, res, do_pad)  # window, is_training, return_residual, res, grad_output)
    dq, dk, dv = grads[:3]
    return dq.astype(jnp.float32), dk.astype(jnp.float32), dv[..., :vdim].astype(jnp.float32)


CUDNN = BlockKernel("cudnn", cudnn_fwd, cudnn_bwd)


# ----------------------------------------------------------------------------------------------- splash (TPU)


def _splash_module():
    """jax's Pallas TPU splash attention (None when not importable)."""
    try:
        from jax.experimental.pallas.ops.tpu import splash_attention as sa
    except ImportError:
        return None
    return sa


def splash_fwd(q_BTHK, k_BSHK, v_BSHV, scale, causal, q_seg_BT=None, kv_seg_BS=None):
    """Block forward with splash attention on TPU (save_residuals gives the lse); XLA elsewhere (recorded)."""
    sa = _splash_module()
    if sa is None or jax.default_backend() != "tpu":
        why = "splash attention is not importable" if sa is None else f"backend is {jax.default_backend()!r}"
        kernel_paths.fallback("block_fwd", "xla", why + ", splash needs 'tpu'")
        return _xla_fwd(q_BTHK, k_BSHK, v_BSHV, scale, causal, q_seg_BT, kv_seg_BS)
    kernel_paths.record("block_fwd", "splash")
    _, t, h, width = q_BTHK.shape
    s, vdim = k_BSHK.shape[1], v_BSHV.shape[-1]
    one = sa.CausalMask((t, s)) if causal else sa.FullMask((t, s))
    kernel = sa.make_splash_mha(sa.MultiHeadMask([one] * h), head_shards=1, q_seq_shards=1, save_residuals=True)
    q_BHTK = jnp.swapaxes(q_BTHK * jnp.asarray(scale, q_BTHK.dtype), 1, 2)  # splash does not scale
    k_BHSK, v_BHSK = jnp.swapaxes(k_BSHK, 1, 2), jnp.swapaxes(_pad_v(v_BSHV, width), 1, 2)

    def one_row(qb, kb, vb, qs, ks):
        seg = None if qs is None else sa.SegmentIds(q=qs, kv=ks)
        return kernel(qb, kb, vb, segment_ids=seg)

    segs = (q_seg_BT, kv_seg_BS) if q_seg_BT is not None else (None, None)
    o_BHTK, (lse_BHT,) = jax.vmap(one_row)(q_BHTK, k_BHSK, v_BHSK, *segs)
    return jnp.swapaxes(o_BHTK[..., :vdim], 1, 2).astype(jnp.float32), jnp.swapaxes(lse_BHT, 1, 2).astype(jnp.float32)


SPLASH = BlockKernel("splash", splash_fwd, xla_bwd)


# ------------------------------------------------------------------------------ query-chunked XLA (memory-bounded)

CHUNK = 512  # query rows per chunk of the chunked XLA kernel


def _chunks(t: int, site: str) -> int:
    """Query chunks of a T-row block (1: one piece, a fallback to full [T, S] logits when T > CHUNK).

    In the planner's counting mode one piece: every chunk costs the same, so the whole block counts the FLOPs of
    the chunks exactly (XLA's cost analysis would count a loop body once) without tracing them unrolled."""
    if t > CHUNK and t % CHUNK:
        kernel_paths.fallback(site, "xla", f"T = {t} is not a multiple of CHUNK = {CHUNK}: full [T, S] logits")
        return 1
    kernel_paths.record(site, "xla_chunked")
    return 1 if planning.count_loops() else max(t // CHUNK, 1)


def _chunk_mask(i, c: int, s: int, causal: bool, qs_BC, kv_seg_BS):
    """[B|1, 1, c, S] visibility of query chunk i (rows i·c … i·c + c − 1) of a block; None when all visible."""
    seg = block_mask(c, s, False, qs_BC, kv_seg_BS)
    if not causal:
        return seg
    rows = i * c + jnp.arange(c)
    tri = (rows[:, None] >= jnp.arange(s)[None, :])[None, None]  # diagonal block: row r sees keys ≤ r
    return tri if seg is None else tri & seg


def split_chunks(x, n: int):
    """[B, T, ...] → [n, B, T/n, ...]: n chunks of T/n rows, chunk-major."""
    return jnp.moveaxis(x.reshape((x.shape[0], n, x.shape[1] // n) + x.shape[2:]), 1, 0)


def join_chunks(x):
    """[n, B, c, ...] → [B, n·c, ...]: the inverse of `split_chunks`."""
    return jnp.moveaxis(x, 0, 1).reshape((x.shape[1], x.shape[0] * x.shape[2]) + x.shape[3:])


def chunked_fwd(q_BTHK, k_BSHK, v_BSHV, scale, causal, q_seg_BT=None, kv_seg_BS=None):
    """`xla_fwd` one chunk of CHUNK query rows at a time (rematerialised): O(CHUNK·S) logits, same results."""
    n = _chunks(q_BTHK.shape[1], "block_fwd")
    if n == 1:
        return _xla_fwd(q_BTHK, k_BSHK, v_BSHV, scale, causal, q_seg_BT, kv_seg_BS)
    c, s = q_BTHK.shape[1] // n, k_BSHK.shape[1]
    qs = split_chunks(q_seg_BT, n) if q_seg_BT is not None else jnp.zeros((n,), jnp.int32)

    @jax.checkpoint
    def body(_, x):
        i, q_c, qs_c = x
        mask = _chunk_mask(i, c, s, causal, qs_c if q_seg_BT is not None else None, kv_seg_BS)
        return None, _masked_fwd(q_c, k_BSHK, v_BSHV, scale, mask)

    _, (o, lse) = jax.lax.scan(body, None, (jnp.arange(n), split_chunks(q_BTHK, n), qs))
    return join_chunks(o), join_chunks(lse)


def chunked_bwd(q_BTHK, k_BSHK, v_BSHV, res: BlockGrad, scale, causal, q_seg_BT=None, kv_seg_BS=None):
    """`xla_bwd` one query chunk at a time: dq per chunk, dk and dv accumulated over the chunks."""
    n = _chunks(q_BTHK.shape[1], "block_bwd")
    if n == 1:
        return _xla_bwd(q_BTHK, k_BSHK, v_BSHV, res, scale, causal, q_seg_BT, kv_seg_BS)
    c, s = q_BTHK.shape[1] // n, k_BSHK.shape[1]
    qs = split_chunks(q_seg_BT, n) if q_seg_BT is not None else jnp.zeros((n,), jnp.int32)

    def body(acc, x):
        i, q_c, lse_c, do_c, delta_c, qs_c = x
        mask = _chunk_mask(i, c, s, causal, qs_c if q_seg_BT is not None else None, kv_seg_BS)
        dq, dk, dv = _masked_bwd(q_c, k_BSHK, v_BSHV, lse_c, do_c, delta_c, scale, mask)
        return (acc[0] + dk, acc[1] + dv), dq

    # Accumulators derived from k and v, so that inside shard_map they vary over the same mesh axes as the chunks'
    # contributions (a scan's carry must keep its type).
    zeros = (jnp.zeros_like(k_BSHK, jnp.float32), jnp.zeros_like(v_BSHV, jnp.float32))
    xs = (jnp.arange(n), *(split_chunks(x, n) for x in (q_BTHK, res.lse, res.do, res.delta)), qs)
    (dk, dv), dq = jax.lax.scan(body, zeros, xs)
    return join_chunks(dq), dk, dv


XLA_CHUNKED = BlockKernel("xla_chunked", chunked_fwd, chunked_bwd)

BLOCK_KERNELS = {"xla": XLA, "xla_chunked": XLA_CHUNKED, "cudnn": CUDNN, "splash": SPLASH}


def get_block_kernel(name: str = "auto") -> BlockKernel:
    """A block kernel by name; 'auto' = cuDNN on GPU, splash on TPU (if importable), XLA otherwise (the chunked
    XLA kernel in the planner's accelerator mode, model/planning.py)."""
    if name == "auto":
        backend = jax.default_backend()
        cpu = "xla_chunked" if planning.use_accelerator_kernels() else "xla"
        name = "cudnn" if backend == "gpu" else "splash" if backend == "tpu" and _splash_module() else cpu
    if name not in BLOCK_KERNELS:
        raise ValueError(f"unknown block kernel {name!r}; expected 'auto' or one of {sorted(BLOCK_KERNELS)}")
    return BLOCK_KERNELS[name]

