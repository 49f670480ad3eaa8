"""Block-scaled FP8 (e4m3) matmuls for the FFNs: the DeepSeek-V3 recipe (technical report, arXiv 2412.19437, §3.3).

Quantization (`model.matmul_precision = 'fp8'`; config.py):
  * a GEMM's activation-like operand is quantized in 1×128 tiles: one scale per row and 128 consecutive elements of
    the contraction dimension (forward: per token per 128 channels);
  * a weight is quantized in 128×128 blocks (128 contraction × 128 output elements per scale);
  * scale = amax / 448 (e4m3's largest finite value) per tile or block, q = round_e4m3(x / scale) in
    `jnp.float8_e4m3fn`; an all-zero tile gets scale 1;
  * the products accumulate in fp32 (`preferred_element_type=float32`) per 128-wide slice of the contraction, each
    slice's partial sum is multiplied by its two scales, and the slices are summed in fp32 — the "promotion to CUDA
    cores every 128 elements" of §3.3.2 written as an explicit sum;
  * master weights stay fp32 (`model.param_dtype`); the weight is quantized from its cast to the compute dtype
    (`model.dtype`, the copy FSDP gathers), and its gradient flows back to the fp32 master through that cast.
Dimensions not divisible by 128 are padded with zeros to the next multiple (a zero raises no amax and adds no
product): the edge tiles and blocks are partial, nothing is rejected, so the toy model's 64-wide FFNs run too.

Forward and backward (`jax.custom_vjp`, so the gradient path is explicit; §3.3, Figure 6: Fprop, Dgrad and Wgrad
all take FP8 inputs), for y = x·w with x [M, K], w [K, N], output gradient g [M, N]:
  Fprop  y  = Q_tile(x; K) · Q_block(w)          x in 1×128 tiles along K, w in 128×128 blocks
  Dgrad  dx = Q_tile(g; N) · Q_block(w)ᵀ         g in 1×128 tiles along N, w's same 128×128 blocks (transposed)
  Wgrad  dw = Q_tile(xᵀ; M) · Q_tile(g; M)       x and g both in 128×1 tiles along the tokens M (the contraction)
The residuals are x and w in the compute dtype (re-quantized in the backward with the tiling each GEMM needs).
Batched (per-expert) weights [G, K, N] are quantized per expert; the grouped (ragged) form quantizes the rows of
group-sorted activations in 1×128 tiles, the per-expert weights in blocks, and for Wgrad tiles of 128 consecutive
rows of one expert counted from its first row, as the batched form's tiles along an expert's buffer: so the grouped
and the batched path, and every expert-parallel layout that keeps an expert's rows in order, quantize alike. Where
tokens are split over data-parallel axes (data, fsdp) each shard's Wgrad quantizes its own tokens' tiles before the
gradients are summed, as every data-parallel FP8 Wgrad does: a different (equally fine) quantization per layout.

Lowering: the dense and batched forms (`fp8_matmul`, `fp8_einsum_batched`: the dense SwiGLU, the capacity and padded
expert paths) issue `dot_general`s on float8_e4m3fn operands, batched over the 128-wide contraction slices, giving
an fp32 [.., K/128, M, N] intermediate that a fused kernel (DeepGEMM-style) keeps in registers; under the
planner's `planning.accelerator_kernels()` they compile as one fp8 dot with a per-row·per-column epilogue, the
cost of such a fused kernel. The grouped form (`fp8_ragged_dot`, the ragged expert path: CPU and TPU default)
multiplies the dequantized fp8 values in fp32 with `lax.ragged_dot`: the same numbers, not fp8 instructions
(ragged_dot has no per-slice scaled form).
"""

from __future__ import annotations

import contextlib
import contextvars

import jax
import jax.numpy as jnp

from composer2_jax.model import planning

F8 = jnp.float8_e4m3fn
F8_MAX = 448.0  # largest finite float8_e4m3fn
TILE = 128  # 1×TILE activation tiles, TILE×TILE weight blocks
PRECISIONS = ("bf16", "fp8")


def _pad_to(x, axis: int, multiple: int = TILE):
    """x zero-padded along `axis` to a multiple of `multiple`."""
    n = x.shape[axis]
    extra = -n % multiple
    if not extra:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return jnp.pad(x, widths)


def _scale_of(amax):
    """amax / 448, and 1 where the tile is all zeros."""
    amax = amax.astype(jnp.float32)
    return jnp.where(amax > 0, amax / F8_MAX, 1.0)


def quantize_tiles(x):
    """1×128 tiles along the last axis: (q [..., K'] float8_e4m3fn, scale [..., K'/128] fp32), K' = K padded."""
    xp = _pad_to(x.astype(jnp.float32), -1)
    t = xp.reshape(*xp.shape[:-1], xp.shape[-1] // TILE, TILE)
    s = _scale_of(jnp.max(jnp.abs(t), axis=-1))
    q = (t / s[..., None]).astype(F8)
    return q.reshape(xp.shape), s


def quantize_blocks(w):
    """128×128 blocks over the last two axes [..., K, N]: (q [..., K', N] float8_e4m3fn, scale [..., K'/128, N]
    fp32: each block's scale repeated over its 128 columns), K' = K padded."""
    n = w.shape[-1]
    wp = _pad_to(_pad_to(w.astype(jnp.float32), -2), -1)
    kb, nb = wp.shape[-2] // TILE, wp.shape[-1] // TILE
    b = wp.reshape(*wp.shape[:-2], kb, TILE, nb, TILE)
    s = _scale_of(jnp.max(jnp.abs(b), axis=(-3, -1)))  # [..., Kb, Nb]
    q = (b / s[..., :, None, :, None]).astype(F8).reshape(wp.shape)[..., :n]
    return q, jnp.repeat(s, TILE, axis=-1)[..., :n]


def dequantize(q, s, axis: int):
    """fp32 values of q whose scales s step every 128 elements along `axis` (-1: tiles, -2: a block's rows)."""
    return q.astype(jnp.float32) * jnp.repeat(s, TILE, axis=axis)


def _scaled_dot(aq, sa, bq, sb):
    """Σ over 128-slices k of sa[g,m,k]·sb[g,k,n]·(aq[g,m,k-slice]·bq[g,k-slice,n]) in fp32: [G, M, N].

    aq [G, M, K'] fp8 with sa [G, M, K'/128]; bq [G, K', N] fp8 with sb [G, K'/128, N]."""
    g, m, kp = aq.shape
    kt = kp // TILE
    if planning.use_accelerator_kernels():  # cost stand-in of a fused block-scaled kernel (never executed)
        y = jax.lax.dot_general(aq, bq, (((2,), (1,)), ((0,), (0,))), preferred_element_type=jnp.float32)
        return y * sa[:, :, :1] * sb[:, :1, :]
    a4 = aq.reshape(g, m, kt, TILE)
    b4 = bq.reshape(g, kt, TILE, bq.shape[-1])
    part = jax.lax.dot_general(a4, b4, (((3,), (2,)), ((0, 2), (0, 1))),
                               preferred_element_type=jnp.float32)  # [G, Kt, M, N]
    return jnp.sum(part * jnp.swapaxes(sa, 1, 2)[..., None] * sb[:, :, None, :], axis=1)


def _fprop(x, w):
    """y [G, M, N] fp32 of x [G, M, K] and w [G, K, N]: x in 1×128 tiles, w in 128×128 blocks."""
    xq, sx = quantize_tiles(x)
    wq, sw = quantize_blocks(w)
    return _scaled_dot(xq, sx, wq, sw)


def _dgrad(g, w):
    """dx [G, M, K] fp32 = Q_tile(g; N) · Q_block(w)ᵀ."""
    gq, sg = quantize_tiles(g)
    k = w.shape[-2]
    wq, sw = quantize_blocks(jnp.swapaxes(w, -1, -2))  # blocks of wᵀ are w's blocks transposed
    return _scaled_dot(gq, sg, wq, sw)[..., :k]


def _wgrad(x, g):
    """dw [G, K, N] fp32 = Q_tile(xᵀ; M) · Q_tile(g; M): both in 128-token tiles along the contraction M."""
    xq, sx = quantize_tiles(jnp.swapaxes(x, -1, -2))  # [G, K, M'], [G, K, M'/128]
    gq, sg = quantize_tiles(jnp.swapaxes(g, -1, -2))  # [G, N, M'], [G, N, M'/128]
    return _scaled_dot(xq, sx, jnp.swapaxes(gq, -1, -2), jnp.swapaxes(sg, -1, -2))


@jax.custom_vjp
def _bmm(x, w):
    """Block-scaled FP8 x [G, M, K] · w [G, K, N] → [G, M, N] in x's dtype (module docstring)."""
    return _fprop(x, w).astype(x.dtype)


def _bmm_fwd(x, w):
    return _bmm(x, w), (x, w)


def _like(ct, primal):
    """Cotangent `ct` summed (psum) over the shard_map axes it varies on and `primal` does not: the transpose of the
    implicit broadcast of an invariant value (a cotangent may arrive more varying than its primal output)."""
    extra = _vma(ct) - _vma(primal)
    ct = jax.lax.psum(ct, tuple(sorted(extra))) if extra else ct
    return ct.astype(primal.dtype)


def _bmm_bwd(res, g):
    x, w = res
    return _like(_dgrad(g, w), x), _like(_wgrad(x, g), w)


_bmm.defvjp(_bmm_fwd, _bmm_bwd)


def _vma(a) -> frozenset:
    """Mesh axes over which `a` varies inside a shard_map (empty outside one): the aval's
    `manual_axis_type.varying` (jax 0.10), or its `vma` (the name other releases use)."""
    t = jax.typeof(a)
    m = getattr(t, "manual_axis_type", None)
    return frozenset(m.varying if m is not None else (getattr(t, "vma", None) or ()))


def _same_vma(x, w):
    """x and w made varying over the same shard_map axes (`lax.pcast(.., to='varying')`), as a plain einsum of the
    two does implicitly: the custom VJP's cotangents then carry its inputs' types, and autodiff of the cast adds the
    psum of the weight's gradient over the axes only the tokens vary on (e.g. `fsdp` inside the expert shard_map)."""
    vx, vw = _vma(x), _vma(w)
    if vx - vw:
        w = jax.lax.pcast(w, tuple(sorted(vx - vw)), to="varying")
    if vw - vx:
        x = jax.lax.pcast(x, tuple(sorted(vw - vx)), to="varying")
    return x, w


def fp8_matmul(x, w):
    """x [..., K] · w [K, N] → [..., N] in x's dtype, block-scaled FP8 forward and backward (module docstring)."""
    if w.ndim != 2 or x.shape[-1] != w.shape[0]:
        raise ValueError(f"fp8_matmul: x {x.shape} · w {w.shape}; expected x [..., K] and w [K, N] with equal K")
    lead = x.shape[:-1]
    y = _bmm(*_same_vma(x.reshape(1, -1, x.shape[-1]), w.astype(x.dtype)[None]))
    return y.reshape(*lead, w.shape[1])


def fp8_einsum_batched(x, w):
    """Per-group x [G, M, K] · w [G, K, N] → [G, M, N] (the `ECD,EDF->ECF` expert einsum), block-scaled FP8."""
    if x.ndim != 3 or w.ndim != 3 or x.shape[0] != w.shape[0] or x.shape[2] != w.shape[1]:
        raise ValueError(f"fp8_einsum_batched: x {x.shape} · w {w.shape}; expected [G, M, K] and [G, K, N]")
    return _bmm(*_same_vma(x, w.astype(x.dtype)))


def _ragged(a, b, sizes):
    return jax.lax.ragged_dot(a, b, sizes, preferred_element_type=jnp.float32)


@jax.custom_vjp
def _ragged_fp8(x, w, sizes):
    """Grouped block-scaled FP8 product of group-sorted rows x [X, K] and per-group w [E, K, N] → [X, N]."""
    xd = dequantize(*quantize_tiles(x), axis=-1)
    wd = dequantize(*quantize_blocks(w), axis=-2)
    k = x.shape[1]
    return _ragged(xd[:, :k], wd[:, :k], sizes).astype(x.dtype)


def _group_row_tiles(sizes_E, n_rows: int):
    """Tile id of each group-sorted row for Wgrad: 128 consecutive rows of one group, counted from the group's first
    row (rows past the groups: a tile of their own), and the number of tile ids."""
    ends_E = jnp.cumsum(sizes_E)
    row_X = jnp.arange(n_rows, dtype=jnp.int32)
    e_X = jnp.searchsorted(ends_E, row_X, side="right").astype(jnp.int32)
    pos_X = row_X - jnp.take(ends_E - sizes_E, e_X, mode="clip")
    per_group = -(-n_rows // TILE)
    return e_X * per_group + pos_X // TILE, (sizes_E.shape[0] + 1) * per_group


def _qdq_row_tiles(x_XK, tile_X, n_tiles: int):
    """x [X, K] quantized to e4m3 in 128×1 tiles (rows grouped by tile_X, one scale per tile and column) and
    dequantized to fp32."""
    x = x_XK.astype(jnp.float32)
    amax_TK = jax.ops.segment_max(jnp.abs(x), tile_X, num_segments=n_tiles)
    s_XK = jnp.take(_scale_of(amax_TK), tile_X, axis=0)
    return (x / s_XK).astype(F8).astype(jnp.float32) * s_XK


def _ragged_fwd(x, w, sizes):
    return _ragged_fp8(x, w, sizes), (x, w, sizes)


def _ragged_bwd(res, g):
    x, w, sizes = res
    k, n = x.shape[1], g.shape[1]
    gd = dequantize(*quantize_tiles(g), axis=-1)[:, :n]  # 1×128 tiles along N
    wtd = dequantize(*quantize_blocks(jnp.swapaxes(w, 1, 2)), axis=-2)  # [E, N', K]
    dx = _ragged(gd, wtd[:, :n, :k], sizes)
    tile_X, n_tiles = _group_row_tiles(sizes, x.shape[0])
    xt = _qdq_row_tiles(x, tile_X, n_tiles)  # 128×1 tiles along each expert's rows
    gt = _qdq_row_tiles(g, tile_X, n_tiles)
    _, pull = jax.vjp(lambda w_: _ragged(xt, w_, sizes), w.astype(jnp.float32))  # linear in w_: any primal
    (dw,) = pull(gt.astype(jnp.float32))
    return _like(dx, x), _like(dw, w), None


_ragged_fp8.defvjp(_ragged_fwd, _ragged_bwd)


def fp8_ragged_dot(x, w, sizes):
    """`lax.ragged_dot(x [X, K], w [E, K, N], sizes [E])` with block-scaled FP8 operands (module docstring)."""
    if x.ndim != 2 or w.ndim != 3 or x.shape[1] != w.shape[1]:
        raise ValueError(f"fp8_ragged_dot: x {x.shape} · w {w.shape}; expected [X, K] and [E, K, N]")
    return _ragged_fp8(*_same_vma(x, w.astype(x.dtype)), sizes)


def check_precision(value: str) -> str:
    """`value` if it names a matmul precision, else a ValueError naming it and the choices."""
    if value not in PRECISIONS:
        raise ValueError(f"model.matmul_precision={value!r}; expected one of {PRECISIONS}")
    return value


_PRECISION = contextvars.ContextVar("composer2_ffn_matmul_precision", default="bf16")


@contextlib.contextmanager
def precision_scope(value: str):
    """Trace the expert FFNs inside with `value` (model/moe.py sets it from model.matmul_precision; the expert
    SwiGLUs of model/grouped_matmul.py read it): a context variable, so the dispatch code between needs no flag."""
    token = _PRECISION.set(check_precision(value))
    try:
        yield
    finally:
        _PRECISION.reset(token)


def current_precision() -> str:
    """The expert FFN matmul precision of the enclosing `precision_scope` ('bf16' outside any)."""
    return _PRECISION.get()
