"""Block-scaled FP8 matmuls (model/fp8.py) against a naive numpy quantize → dequantize → fp32 matmul reference,
their custom_vjp gradients against autodiff of that reference, the error bound against the exact matmul, and the
option wired into the model (dense SwiGLU, every expert path, expert parallelism)."""

import dataclasses

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from composer2_jax import chips
from composer2_jax.model import fp8
from composer2_jax.model.moe import MoE
from composer2_jax.model_config import get_model_config
from composer2_jax.plan import roofline
from tests.test_moe_expert_parallel import MESHES, _loss_and_grads, _on_mesh
from tests.test_moe_layer import init_moe
from tests.tolerances import FP8_RELAYOUT_GRAD_RTOL, FP8_VS_BF16_LOSS_RTOL, FP32_BLOCK, SHARDED_FP32

rng = np.random.default_rng(7)
U = 2.0 ** -4  # e4m3 unit roundoff: 3 mantissa bits, round to nearest
SUB = 2.0 ** -10  # half the e4m3 subnormal spacing (2^-9), in units of the scale


# ------------------------------------------------------------------------------------------ naive numpy reference


def np_qdq(x, tile_rows: int, tile_cols: int):
    """x [R, C] quantized tile by tile (tile_rows × tile_cols, partial at the edges): scale = amax/448 (1 for an
    all-zero tile), q = e4m3(x / scale), returned dequantized (q · scale) in fp32, with each element's tile amax."""
    x = np.asarray(x, np.float32)
    out, amax = np.zeros_like(x), np.zeros_like(x)
    for r in range(0, x.shape[0], tile_rows):
        for c in range(0, x.shape[1], tile_cols):
            t = x[r:r + tile_rows, c:c + tile_cols]
            a = np.float32(np.abs(t).max())
            s = np.float32(a / np.float32(448.0)) if a > 0 else np.float32(1.0)
            q = (t / s).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
            out[r:r + tile_rows, c:c + tile_cols] = q * s
            amax[r:r + tile_rows, c:c + tile_cols] = a
    return out, amax


def np_fp8_matmul(x, w):
    """Reference forward: x in 1×128 tiles, w in 128×128 blocks, fp32 matmul."""
    return np_qdq(x, 1, 128)[0] @ np_qdq(w, 128, 128)[0]


def _data(m=40, k=300, n=200):
    """x, w with partial edge tiles (K = 300, N = 200), rows of very different magnitude and tiny values that land
    in e4m3's subnormals."""
    x = rng.normal(size=(m, k)).astype(np.float32) * np.exp(rng.normal(size=(m, 1)) * 2).astype(np.float32)
    x[:, :5] *= 1e-4
    w = (rng.normal(size=(k, n)) * 0.05).astype(np.float32)
    w[:7] *= 1e-3
    return x, w


def test_fp8_matmul_matches_naive_block_scaled_reference():
    x, w = _data()
    y = jax.jit(fp8.fp8_matmul)(x, w)
    np.testing.assert_allclose(np.asarray(y), np_fp8_matmul(x, w), **FP32_BLOCK)


def test_fp8_matmul_within_derived_bound_of_exact_matmul():
    """|ŷ − y| ≤ (2u + u²)·(|x|·|w|) + (2^-10/448)·(A_x·|w̃| + |x|·A_w) per output, u = 2^-4.

    Each e4m3 value x̃ = q·s of x (s = tile amax/448, |x/s| ≤ 448) is within u·|x| of x in the normal range and
    within s·2^-10 in the subnormal one, so |x̃ − x| ≤ u|x| + (A/448)·2^-10 with A the element's tile amax;
    x̃w̃ − xw = (x̃ − x)w̃ + x(w̃ − w) and |w̃| ≤ (1 + u)|w| + … give the bound (fp32 rounding adds ~1e-6 relative,
    covered by the slack term)."""
    x, w = _data()
    y = np.asarray(jax.jit(fp8.fp8_matmul)(x, w), np.float64)
    exact = x.astype(np.float64) @ w.astype(np.float64)
    wd, aw = np_qdq(w, 128, 128)
    _, ax = np_qdq(x, 1, 128)
    bound = ((2 * U + U * U) * (np.abs(x) @ np.abs(w)).astype(np.float64)
             + SUB / 448 * (ax.astype(np.float64) @ np.abs(wd) + np.abs(x) @ aw.astype(np.float64)))
    err = np.abs(y - exact)
    assert np.all(err <= bound * (1 + 1e-5) + 1e-6 * np.abs(exact).max()), float((err / bound).max())
    assert (err / bound).max() > 0.01  # the bound is not vacuous: the error is a visible share of it
    rel = np.linalg.norm(y - exact) / np.linalg.norm(exact)
    assert 1e-4 < rel < 2 * U  # FP8 rounding really happened, and stays below the worst case


def test_fp8_matmul_gradients_match_autodiff_of_reference():
    """custom_vjp (Dgrad: g in 1×128 tiles along N, w's blocks; Wgrad: x and g in 128×1 tiles along M) against
    jax autodiff of the naive quantize→dequantize reference, fed the cotangent quantized the same way."""
    x, w = _data(m=150)
    g = rng.normal(size=(x.shape[0], w.shape[1])).astype(np.float32)
    _, pull = jax.vjp(fp8.fp8_matmul, jnp.asarray(x), jnp.asarray(w))
    dx, dw = pull(jnp.asarray(g))
    wd = jnp.asarray(np_qdq(w, 128, 128)[0])
    xd_rows = jnp.asarray(np_qdq(x, 1, 128)[0])
    xd_tok = jnp.asarray(np_qdq(x, 128, 1)[0])  # 128×1 tiles: 128 tokens of one channel

    def ref_x(x_):  # the reference forward with a straight-through quantizer on x (STE: derivative 1)
        return (x_ + jax.lax.stop_gradient(xd_rows - x_)) @ wd

    def ref_w(w_):  # Wgrad's GEMM: x in its backward tiling, w straight-through
        return xd_tok @ (w_ + jax.lax.stop_gradient(wd - w_))

    dx_ref = jax.vjp(ref_x, jnp.asarray(x))[1](jnp.asarray(np_qdq(g, 1, 128)[0]))[0]
    dw_ref = jax.vjp(ref_w, jnp.asarray(w))[1](jnp.asarray(np_qdq(g, 128, 1)[0]))[0]
    np.testing.assert_allclose(np.asarray(dx), np.asarray(dx_ref), **FP32_BLOCK)
    np.testing.assert_allclose(np.asarray(dw), np.asarray(dw_ref), **FP32_BLOCK)
    assert dw.dtype == jnp.float32  # the fp32 master weight's gradient


def _groups():
    """Group-sorted rows, per-group weights and sizes (one empty group, one group over two 128-row tiles)."""
    sizes = np.array([70, 0, 150, 36], np.int32)
    x = rng.normal(size=(int(sizes.sum()) + 4, 200)).astype(np.float32)  # 4 rows past the groups
    w = (rng.normal(size=(4, 200, 130)) * 0.1).astype(np.float32)
    return x, w, sizes


def test_batched_and_ragged_fp8_match_reference_with_gradients():
    x, w, sizes = _groups()
    starts = np.concatenate([[0], np.cumsum(sizes)])
    g = rng.normal(size=(x.shape[0], w.shape[2])).astype(np.float32)
    y, pull = jax.vjp(lambda a, b: fp8.fp8_ragged_dot(a, b, jnp.asarray(sizes)), jnp.asarray(x), jnp.asarray(w))
    dx, dw = pull(jnp.asarray(g))
    for e in range(4):
        r = slice(starts[e], starts[e + 1])
        np.testing.assert_allclose(np.asarray(y)[r], np_fp8_matmul(x[r], w[e]), **FP32_BLOCK)
        np.testing.assert_allclose(np.asarray(dx)[r], np_qdq(g[r], 1, 128)[0] @ np_qdq(w[e], 128, 128)[0].T,
                                   **FP32_BLOCK)
        dw_ref = np_qdq(x[r], 128, 1)[0].T @ np_qdq(g[r], 128, 1)[0]  # tiles counted from the group's first row
        np.testing.assert_allclose(np.asarray(dw)[e], dw_ref, **FP32_BLOCK)
    np.testing.assert_array_equal(np.asarray(y)[starts[-1]:], 0)
    # the batched form on each group's rows padded to one buffer [E, C, K] computes the same numbers
    c = int(sizes.max())
    buf = np.zeros((4, c, x.shape[1]), np.float32)
    gbuf = np.zeros((4, c, g.shape[1]), np.float32)
    for e in range(4):
        buf[e, : sizes[e]] = x[starts[e]:starts[e + 1]]
        gbuf[e, : sizes[e]] = g[starts[e]:starts[e + 1]]
    yb, pullb = jax.vjp(fp8.fp8_einsum_batched, jnp.asarray(buf), jnp.asarray(w))
    dxb, dwb = pullb(jnp.asarray(gbuf))
    for e in range(4):
        np.testing.assert_allclose(np.asarray(yb)[e, : sizes[e]], np.asarray(y)[starts[e]:starts[e + 1]],
                                   **FP32_BLOCK)
        np.testing.assert_allclose(np.asarray(dxb)[e, : sizes[e]], np.asarray(dx)[starts[e]:starts[e + 1]],
                                   **FP32_BLOCK)
    np.testing.assert_allclose(np.asarray(dwb), np.asarray(dw), **FP32_BLOCK)


def test_bad_shapes_and_precision_are_errors():
    with pytest.raises(ValueError, match=r"expected x \[..., K\] and w \[K, N\]"):
        fp8.fp8_matmul(jnp.ones((4, 8)), jnp.ones((9, 3)))
    with pytest.raises(ValueError, match="matmul_precision='fp4'"):
        get_model_config("toy", matmul_precision="fp4")


# ------------------------------------------------------------------------------------------------ in the model

FP8_TOY = dict(hidden_size=256, intermediate_size=384, moe_intermediate_size=160, matmul_precision="fp8")


def test_every_expert_path_runs_fp8():
    """The MoE layer with fp8 on: every expert path (ragged, padded with its fallback, capacity with room for every
    assignment) gives the same output, which differs from the bf16-option output by FP8 rounding only."""
    cfg = get_model_config("toy", **FP8_TOY, moe_gmm_impl="ragged")
    x = rng.normal(size=(2, 32, cfg.hidden_size)).astype(np.float32)
    v = init_moe(cfg, x)
    y_ref = np.asarray(jax.jit(MoE(cfg).apply)(v, x)[0])
    for path in (dict(moe_gmm_impl="padded", moe_dropless_slack=1.0), dict(moe_impl="capacity",
                                                                           moe_capacity_factor=4.0)):
        y8 = np.asarray(jax.jit(MoE(dataclasses.replace(cfg, **path)).apply)(v, x)[0])
        np.testing.assert_allclose(y8, y_ref, err_msg=str(path), **FP32_BLOCK)
    y16 = np.asarray(jax.jit(MoE(dataclasses.replace(cfg, matmul_precision="bf16")).apply)(v, x)[0])
    rel = np.linalg.norm(y_ref - y16) / np.linalg.norm(y16)
    assert 1e-4 < rel < 2 * (2 * U + U * U)  # quantized (not bit-identical), within twice the one-GEMM bound


@pytest.mark.slow
def test_sharded_fp8_moe_matches_single_device():
    """Expert parallelism on 8 fake devices with fp8 on. `expert=8`: output, routing and every gradient equal the
    single-device fp8 layer at SHARDED_FP32 — activation tiles are per row, weight blocks per expert, and the
    all-to-all brings all of an expert's rows, in order, to one device, where Wgrad's token tiles start at the
    expert's first row. The gradients' GEMMs take cotangents whose fp32 rounding differs between layouts (through
    silu(gate), the combine weights); where that moves an element across an e4m3 boundary the gradient moves by one
    e4m3 step: each gradient is within FP8_RELAYOUT_GRAD_RTOL and > 99 % of its elements within SHARDED_FP32.
    `data=2, expert=4` and `fsdp=2, expert=4`: each token shard computes its experts' Wgrad on its own tokens
    (its own token tiles) and the shards' sums are added, so the expert Wgrads are a different quantization and are
    not compared; everything else is, likewise."""
    cfg = get_model_config("toy", **FP8_TOY)
    x = rng.normal(size=(8, 24, cfg.hidden_size)).astype(np.float32)
    ct = rng.normal(size=x.shape).astype(np.float32)
    v = init_moe(cfg, x)
    y0, aux0, g0 = _loss_and_grads(cfg, v, x, ct)
    expert_wgrads = ("[0]['wi_gate']", "[0]['wi_up']", "[0]['wo']")
    for mesh in ("expert8", "data2_expert4", "data1_fsdp2_expert4"):
        with _on_mesh(MESHES[mesh]) as m:
            y1, aux1, g1 = _loss_and_grads(cfg, v, x, ct, mesh=m)
        np.testing.assert_array_equal(np.asarray(aux1["indices"]), np.asarray(aux0["indices"]))
        np.testing.assert_allclose(np.asarray(y1), np.asarray(y0), **SHARDED_FP32)
        for (path, a), b in zip(jax.tree_util.tree_flatten_with_path(g0)[0], jax.tree.leaves(g1)):
            key = jax.tree_util.keystr(path)
            a, b, name = np.asarray(a), np.asarray(b), mesh + key
            if key in expert_wgrads and mesh != "expert8":
                continue
            assert np.linalg.norm(b - a) <= FP8_RELAYOUT_GRAD_RTOL * np.linalg.norm(a), name
            assert np.mean(np.isclose(b, a, **SHARDED_FP32)) > 0.99, name  # all but the few flipped tiles


# ------------------------------------------------------------------------------------------------- the planner


def test_planner_counts_ffn_matmuls_at_the_fp8_peak():
    """kimi_k2_5 by hand: 1 dense layer (3·2·D·I) + 60 MoE layers and 1 MTP depth (k = 8 routed + 1 shared expert,
    3·2·D·F each), × 4 passes under full remat; at the H200's 1979 vs 989 TFLOP/s those FLOPs take half the time."""
    cfg = get_model_config("kimi_k2_5", matmul_precision="fp8")
    d, i, f = 7168, 18432, 2048
    per_token = 4 * (3 * 2 * d * i + 61 * (8 + 1) * 3 * 2 * d * f)
    assert roofline.fp8_matmul_flops_per_token(cfg) == per_token
    assert roofline.fp8_matmul_flops_per_token(dataclasses.replace(cfg, matmul_precision="bf16")) == 0.0
    h200 = chips.get_chip("h200")
    t = roofline.compute_seconds(3e15, 2e15, h200)
    assert t["compute_s"] == pytest.approx(1e15 / 989e12 + 2e15 / 1979e12)
    assert roofline.compute_seconds(1e15, 2e15, h200)["fp8_flops"] == 1e15  # never more than all FLOPs
    with pytest.raises(ValueError, match="chip 'v5p' has no FP8 matmul peak"):
        roofline.compute_seconds(3e15, 2e15, chips.get_chip("v5p"))


# ------------------------------------------------------------------------------------------------ training


@pytest.mark.slow
def test_fp8_training_tracks_bf16_loss_curve():
    """60 AdamW steps of the toy MoE model (bf16 compute, FFN widths 256/384/160) with fp8 on and off, same
    bigram-chain data and seeds: both learn (the loss falls by more than 2 nats), the curves differ (FP8 really ran)
    and every 10-step window's mean loss is within FP8_VS_BF16_LOSS_RTOL. The 300-step table:
    benchmarks/learning/fp8_vs_bf16.py."""
    from benchmarks.learning.fp8_vs_bf16 import Run, side_by_side, window_gaps

    _, l16, l8 = zip(*side_by_side(Run(steps=60, batch=4, seq_len=32)))
    assert l16[-1] < l16[0] - 2 and l8[-1] < l8[0] - 2, (l16, l8)
    assert l16 != l8
    gaps = window_gaps(list(l16), list(l8), 10)
    assert max(g[3] for g in gaps) <= FP8_VS_BF16_LOSS_RTOL, gaps


def test_capacity_fp8_under_fsdp_and_expert_parallelism_differentiates():
    """Capacity dispatch with fp8 on a data1·fsdp2·expert4 mesh: the expert weights vary over `expert` only, the
    tokens over fsdp too; the custom VJP's inputs are cast to the same varying axes (fp8._same_vma), else jax
    rejects the backward's types. Gradients are finite and reach the expert weights."""
    cfg = get_model_config("toy", matmul_precision="fp8", moe_impl="capacity")
    x = rng.normal(size=(8, 8, cfg.hidden_size)).astype(np.float32)
    v = init_moe(cfg, x)
    with _on_mesh(MESHES["data1_fsdp2_expert4"]) as m:
        _, _, (gp, gx) = _loss_and_grads(cfg, v, x, rng.normal(size=x.shape).astype(np.float32), mesh=m)
    for name in ("wi_gate", "wi_up", "wo"):
        g = np.asarray(gp[name])
        assert np.all(np.isfinite(g)) and np.abs(g).sum() > 0, name
    assert np.all(np.isfinite(np.asarray(gx)))
