"""No silent path changes: every kernel fallback is recorded with its reason, strict mode makes it an error, the ring
merges fp32 LSEs only, and the cuDNN backward asks for no bias gradient of a boolean segment mask."""

import json
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from composer2_jax.model import attention, grouped_matmul, kernel_paths, kernels, ring_attention
from composer2_jax.model.context_parallel import ContextOptions
from tests.tolerances import FP32_BLOCK, FP32_FN

pytestmark = pytest.mark.usefixtures("clean_kernel_paths")


def _qkv(t=16, h=2, k=8, v=8, dtype=jnp.float32):
    keys = jax.random.split(jax.random.key(0), 4)
    return (jax.random.normal(keys[0], (1, t, h, k), dtype), jax.random.normal(keys[1], (1, t, h, k), dtype),
            jax.random.normal(keys[2], (1, t, h, v), dtype), jax.random.normal(keys[3], (1, t, h, v), dtype))


def test_cudnn_block_on_cpu_records_its_fallback_and_matches_xla():
    q, k, v, do = _qkv()
    o, lse = kernels.cudnn_fwd(q, k, v, 0.3, True)
    o_ref, lse_ref = kernels.xla_fwd(q, k, v, 0.3, True)
    np.testing.assert_allclose(o, o_ref, **FP32_FN)
    np.testing.assert_allclose(lse, lse_ref, **FP32_FN)
    delta = jnp.sum(do * o, -1)
    kernels.cudnn_bwd(q, k, v, kernels.BlockGrad(o, lse, do, delta), 0.3, True)
    snap = kernel_paths.snapshot()
    assert snap["paths"]["block_fwd"] == ["xla"] and snap["paths"]["block_bwd"] == ["xla"]
    assert snap["fallbacks"]["block_fwd"] == ["xla: backend is 'cpu', cuDNN needs 'gpu'"]
    assert snap["fallbacks"]["block_bwd"] == ["xla: backend is 'cpu', cuDNN needs 'gpu'"]


@pytest.mark.parametrize("how", ["flag", "env"])
def test_strict_mode_turns_the_cudnn_fallback_into_an_error_naming_the_reason(how, monkeypatch):
    if how == "flag":
        kernel_paths.set_strict(True)
    else:
        monkeypatch.setenv(kernel_paths.ENV_STRICT, "1")
    q, k, v, _ = _qkv()
    with pytest.raises(kernel_paths.KernelFallbackError, match=r"block_fwd: fell back to 'xla' \(backend is 'cpu'"):
        kernels.cudnn_fwd(q, k, v, 0.3, True)
    assert kernel_paths.snapshot()["fallbacks"] == {}


def test_cudnn_refusal_names_dtype_and_head_dim(monkeypatch):
    monkeypatch.setattr(kernels.jax, "default_backend", lambda: "gpu")
    q32 = jnp.zeros((1, 8, 2, 64), jnp.float32)
    assert kernels.cudnn_refusal(q32) == "dtype float32, cuDNN needs bfloat16 or float16"
    assert "head dim 260" in kernels.cudnn_refusal(jnp.zeros((1, 8, 2, 260), jnp.bfloat16))
    assert "head dim 100" in kernels.cudnn_refusal(jnp.zeros((1, 8, 2, 100), jnp.bfloat16))
    assert kernels.cudnn_refusal(jnp.zeros((1, 8, 2, 192), jnp.bfloat16)) is None


@pytest.mark.parametrize("segments", [False, True])
def test_cudnn_backward_asks_for_no_bias_gradient_of_a_segment_mask(segments, monkeypatch):
    """(has_bias, has_dbias): a boolean mask becomes a constant bias whose gradient cuDNN refuses to compute."""
    real = kernels._cudnn_module()
    seen = {}

    def bwd_rule(scale, seed, dropout, variadic_args, *rest):
        seen["variadic_args"] = variadic_args
        q, k, v = rest[-2][:3]
        return jnp.zeros_like(q), jnp.zeros_like(k), jnp.zeros_like(v)

    fake = types.SimpleNamespace(combine_bias_and_mask=real.combine_bias_and_mask, MaskType=real.MaskType,
                                 AttentionLayout=real.AttentionLayout, _dot_product_attention_bwd_rule=bwd_rule)
    monkeypatch.setattr(kernels, "_cudnn_module", lambda: fake)
    q, k, v, do = _qkv(dtype=jnp.bfloat16)
    seg = jnp.asarray([[0] * 8 + [1] * 8], jnp.int32) if segments else None
    o, lse = kernels.xla_fwd(q, k, v, 0.3, False, seg, seg)
    kernels._cudnn_fused_bwd(q, k, v, kernels.BlockGrad(o, lse, do, None), 0.3, False, seg, seg)
    assert seen["variadic_args"] == (segments, False)


def test_ring_refuses_a_block_lse_that_is_not_fp32(monkeypatch):
    def bf16_fwd(*a):
        o, lse = kernels.xla_fwd(*a)
        return o, lse.astype(jnp.bfloat16)

    monkeypatch.setitem(kernels.BLOCK_KERNELS, "bf16_lse", kernels.BlockKernel("bf16_lse", bf16_fwd,
                                                                              kernels.xla_bwd))
    q, k, v, _ = _qkv()
    with pytest.raises(TypeError, match="'bf16_lse' returned an LSE of dtype bfloat16"):
        ring_attention.ring_attention(q, k, v, options=ContextOptions(block_kernel="bf16_lse"))
    # the fp32 kernel passes the same check
    out = ring_attention.ring_attention(q, k, v, options=ContextOptions(block_kernel="xla"))
    assert out.dtype == q.dtype


def _skewed_rows(e=4, rows=32, d=8, f=16):
    """Rows where expert 0 takes half of them (16 > 8 padded slots) and their ragged reference."""
    keys = jax.random.split(jax.random.key(1), 4)
    x = jax.random.normal(keys[0], (rows, d))
    ws = [0.3 * jax.random.normal(kk, s) for kk, s in zip(keys[1:], ((e, d, f), (e, d, f), (e, f, d)), strict=True)]
    sizes = jnp.asarray([16, 8, 4, 4], jnp.int32)
    e_R, pos_R = grouped_matmul.sorted_groups(sizes, rows)
    return x, e_R, pos_R, sizes, ws


def test_padded_overflow_runs_ragged_and_is_counted():
    x, e_R, pos_R, sizes, ws = _skewed_rows()
    ref = grouped_matmul.grouped_swiglu(x, e_R, pos_R, sizes, ws, impl="ragged")
    run = jax.jit(lambda *a: grouped_matmul.grouped_swiglu(*a, ws, impl="padded", capacity=8))
    kernel_paths.reset()
    np.testing.assert_allclose(run(x, e_R, pos_R, sizes), ref, **FP32_BLOCK)
    snap = kernel_paths.snapshot()
    assert snap["paths"]["grouped_matmul"] == ["padded+ragged_on_overflow"]
    assert snap["runtime_fallbacks"] == {"grouped_matmul": 1}
    balanced = jnp.asarray([8, 8, 8, 8], jnp.int32)
    e_b, pos_b = grouped_matmul.sorted_groups(balanced, 32)
    run(x, e_b, pos_b, balanced)
    assert kernel_paths.snapshot()["runtime_fallbacks"] == {"grouped_matmul": 1}  # the padded branch: no count


def test_strict_padded_compiles_no_ragged_branch_and_raises_on_overflow():
    kernel_paths.set_strict(True)
    x, e_R, pos_R, sizes, ws = _skewed_rows()
    run = jax.jit(lambda *a: grouped_matmul.grouped_swiglu(*a, ws, impl="padded", capacity=8))
    assert "ragged" not in run.lower(x, e_R, pos_R, sizes).as_text()
    with pytest.raises(Exception, match="largest expert group exceeds its padded slots: 16 > 8"):
        jax.block_until_ready(run(x, e_R, pos_R, sizes))
        jax.effects_barrier()
    balanced = jnp.asarray([8, 8, 8, 8], jnp.int32)
    e_b, pos_b = grouped_matmul.sorted_groups(balanced, 32)
    ref = grouped_matmul.grouped_swiglu(x, e_b, pos_b, balanced, ws, impl="ragged")
    np.testing.assert_allclose(run(x, e_b, pos_b, balanced), ref, **FP32_BLOCK)
    jax.effects_barrier()


def test_grouped_matmul_records_and_strict_checks_too():
    kernel_paths.set_strict(True)
    x = jax.random.normal(jax.random.key(2), (32, 8))
    w = jax.random.normal(jax.random.key(3), (4, 8, 16))
    sizes = jnp.asarray([16, 8, 4, 4], jnp.int32)
    with pytest.raises(Exception, match="16 > 8"):
        jax.block_until_ready(jax.jit(lambda *a: grouped_matmul.grouped_matmul(*a, impl="padded", capacity=8))(
            x, w, sizes))
        jax.effects_barrier()
    assert kernel_paths.snapshot()["paths"]["grouped_matmul"] == ["padded"]


def test_chunked_attention_records_its_fallback_to_full_logits():
    q, k, v, _ = _qkv(t=24)
    out = attention.chunked_attention(q, k, v, scale=0.3, chunk=16)  # 24 is not a multiple of 16
    np.testing.assert_allclose(out, attention.xla_attention(q, k, v, scale=0.3), **FP32_FN)
    assert kernel_paths.snapshot()["fallbacks"]["attention"] == [
        "xla: T = 24 is not a multiple of the chunk 16: full [T, S] logits"]
    kernel_paths.set_strict(True)
    with pytest.raises(kernel_paths.KernelFallbackError, match="T = 24 is not a multiple"):
        attention.chunked_attention(q, k, v, scale=0.3, chunk=16)
    attention.chunked_attention(q, k, v, scale=0.3, chunk=8)  # 24 = 3 chunks: no fallback


def test_benchmark_lines_carry_the_paths_of_their_own_work(capsys):
    from benchmarks.perf.common import emit

    q, k, v, _ = _qkv()
    kernels.xla_fwd(q, k, v, 0.3, True)
    emit(bench="one")
    emit(bench="two")
    one, two = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert one["kernel_paths"]["paths"] == {"block_fwd": ["xla"]}
    assert two["kernel_paths"]["paths"] == {}
