"""MoE benchmark (JSON lines): grouped expert matmul and the MoE layer, each as a ratio to a dense equivalent.

    python -m benchmarks.perf.moe_dispatch               # CPU sizes, well under a minute
    python -m benchmarks.perf.moe_dispatch --gpu         # H200 sizes, bf16 (docs/design.md facts: 64k rows, D 2048,
                                                         # F 1024, E 8/64/256)
    python -m benchmarks.perf.moe_dispatch --gpu --smoke # the --gpu code path at toy sizes (a CPU check of the script)

Records:
  grouped_matmul  rows X grouped over E experts (balanced), X·D·F·2 FLOPs, against one dense [X, D]·[D, F] matmul:
                  impl = ragged (lax.ragged_dot) | padded_einsum (the `ECD,EDF->ECF` core on a laid-out buffer) |
                  padded (grouped_matmul.grouped_matmul: layout scatter + einsum + gather back)
                  ratio_to_dense = dense time / grouped time (1.0 = as fast as a dense matmul; goal ≥ 0.85 on H200)
  moe_layer       forward+backward of the MoE layer (routing, dispatch, routed + shared experts) against a dense SwiGLU
                  FFN of the same active FLOPs (width (k + shared)·F): ratio_to_dense = dense time / MoE time
Every line carries the kernel paths its work took (benchmarks/perf/common.py); strict kernels are on by default, so a
padded grouped matmul whose expert overflows its slots is an error, never a ragged_dot time labelled padded.
Ratios are measured side by side in one run. Nothing beyond jax and flax is imported (the device image has no
ml_collections or grain: tests/test_import_hygiene.py).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from benchmarks.perf.common import add_strict_flag, apply_strict, emit
from composer2_jax.model.grouped_matmul import grouped_matmul, round_up, tile_rows
from composer2_jax.model.layers import MLP
from composer2_jax.model.moe import MoE
from composer2_jax.model_config import get_model_config

PRESETS = {
    "cpu": dict(rows=8192, d=256, f=128, experts=(8, 32), dtype="float32",
                layer=dict(tokens=2048, d=256, f=128, e=16, k=4)),
    "gpu": dict(rows=65536, d=2048, f=1024, experts=(8, 64, 256), dtype="bfloat16",
                layer=dict(tokens=16384, d=2048, f=1024, e=64, k=8)),
}


def timeit(fn, *args, repeats: int = 10) -> float:
    """Fastest of `repeats` timed calls (after compile + warm-up): robust on a shared CPU, ≈ median on a GPU.

    Slow paths get fewer repeats (at least 3) so that each case times about 2 seconds at most.
    """
    jax.block_until_ready(fn(*args))
    t = time.perf_counter()
    jax.block_until_ready(fn(*args))
    times = [time.perf_counter() - t]
    for _ in range(max(3, min(repeats, int(2.0 / max(times[0], 1e-9)))) - 1):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t)
    return float(np.min(times))


def bench_grouped_matmul(rows: int, d: int, f: int, e: int, dtype, repeats: int):
    """Grouped matmul paths vs one dense matmul of the same FLOPs."""
    k1, k2 = jax.random.split(jax.random.key(0))
    x_XD = jax.random.normal(k1, (rows, d), dtype)
    w_EDF = jax.random.normal(k2, (e, d, f), dtype) * d ** -0.5
    sizes_E = jnp.full((e,), rows // e, jnp.int32)
    slots = round_up(rows // e, tile_rows())
    flops = 2 * rows * d * f
    t_dense = timeit(jax.jit(lambda x, w: x @ w[0]), x_XD, w_EDF, repeats=repeats)
    paths = {
        "ragged": jax.jit(lambda x, w, s: grouped_matmul(x, w, s, "ragged")),
        "padded_einsum": jax.jit(lambda x, w, s: jnp.einsum("ECD,EDF->ECF", x.reshape(e, -1, d), w)),
        "padded": jax.jit(lambda x, w, s: grouped_matmul(x, w, s, "padded", slots)),
    }
    emit(bench="dense_matmul", rows=rows, d=d, f=f, dtype=str(np.dtype(dtype)), seconds=t_dense,
         tflops=flops / t_dense / 1e12)
    for impl, fn in paths.items():
        t = timeit(fn, x_XD, w_EDF, sizes_E, repeats=repeats)
        emit(bench="grouped_matmul", impl=impl, experts=e, rows=rows, d=d, f=f, dtype=str(np.dtype(dtype)),
             seconds=t, tflops=flops / t / 1e12, ratio_to_dense=t_dense / t)


def _fwd_bwd(module, x_BTD, ct_BTD, variables):
    """Jitted value_and_grad of Σ y·ct with respect to the parameters and the input."""
    def loss(params, x):
        out = module.apply(dict(variables, params=params), x)
        y = out[0] if isinstance(out, tuple) else out
        return jnp.sum(y.astype(jnp.float32) * ct_BTD)

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))


def bench_moe_layer(tokens: int, d: int, f: int, e: int, k: int, dtype: str, repeats: int):
    """MoE layer fwd+bwd (each dispatch and grouped-matmul choice) vs a dense FFN of equal active FLOPs."""
    b, t = 4, tokens // 4
    x = jax.random.normal(jax.random.key(1), (b, t, d), jnp.float32).astype(dtype)
    ct = jax.random.normal(jax.random.key(2), (b, t, d), jnp.float32)
    base = dict(hidden_size=d, moe_intermediate_size=f, n_routed_experts=e, num_experts_per_tok=k, n_group=1,
                topk_group=1, n_shared_experts=1, dtype=dtype, param_dtype="float32", num_heads=4)
    dense_cfg = get_model_config("toy", **base)
    dense = MLP(dense_cfg, (k + 1) * f)
    v_dense = nn.unbox(jax.jit(dense.init)(jax.random.key(0), x))
    t_dense = timeit(_fwd_bwd(dense, x, ct, v_dense), v_dense["params"], x, repeats=repeats)
    active_flops = 3 * 2 * 3 * tokens * d * (k + 1) * f  # fwd + 2× bwd, three matmuls of D×F per active expert
    emit(bench="dense_ffn", tokens=tokens, d=d, width=(k + 1) * f, dtype=dtype, seconds=t_dense,
         tflops=active_flops / t_dense / 1e12)
    for moe_impl, gmm in (("dropless", "ragged"), ("dropless", "padded"), ("capacity", "padded")):
        cfg = get_model_config("toy", **base, moe_impl=moe_impl, moe_gmm_impl=gmm, moe_capacity_factor=1.25)
        moe = MoE(cfg)
        v = nn.unbox(jax.jit(moe.init)(jax.random.key(0), x))
        t_moe = timeit(_fwd_bwd(moe, x, ct, v), v["params"], x, repeats=repeats)
        emit(bench="moe_layer", moe_impl=moe_impl, gmm=gmm, tokens=tokens, d=d, f=f, experts=e, k=k, dtype=dtype,
             seconds=t_moe, active_tflops=active_flops / t_moe / 1e12, ratio_to_dense=t_dense / t_moe)


def _shrink(p: dict) -> dict:
    """A preset at toy size with the same structure (expert counts, k and dtype kept)."""
    layer = dict(p["layer"], tokens=p["layer"]["tokens"] // 64, d=p["layer"]["d"] // 8, f=p["layer"]["f"] // 8)
    return dict(p, rows=p["rows"] // 64, d=p["d"] // 8, f=p["f"] // 8, layer=layer)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", action="store_true", help="H200 sizes (default: CPU sizes)")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--smoke", action="store_true", help="shrink the preset (rows ÷64, widths ÷8) to check the script")
    add_strict_flag(ap)
    a = ap.parse_args(argv)
    apply_strict(a)
    p = PRESETS["gpu" if a.gpu else "cpu"]
    if a.smoke:
        p = _shrink(p)
    emit(bench="env", backend=jax.default_backend(), device=str(jax.devices()[0].device_kind),
         jax=jax.__version__, preset=("gpu" if a.gpu else "cpu") + ("_smoke" if a.smoke else ""))
    for e in p["experts"]:
        bench_grouped_matmul(p["rows"], p["d"], p["f"], e, jnp.dtype(p["dtype"]), a.repeats)
    bench_moe_layer(**p["layer"], dtype=p["dtype"], repeats=a.repeats)


if __name__ == "__main__":
    main()
