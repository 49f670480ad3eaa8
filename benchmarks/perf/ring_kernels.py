"""Ring attention benchmark: JSON lines of ratios measured in one run (plus analytic counts, marked as such).

  python benchmarks/perf/ring_kernels.py            # CPU, 8 fake devices, < 1 minute
  python benchmarks/perf/ring_kernels.py --gpu      # one H200: block kernel vs the cuDNN ceiling, 64k gpu_small step
  python benchmarks/perf/ring_kernels.py --gpu --stage tflops --t 32768   # one GPU stage (benchmarks/perf/gpu_suite.py)
  python benchmarks/perf/ring_kernels.py --gpu --smoke   # the --gpu code path at toy sizes (runs on CPU)

GPU lines use `get_block_kernel('auto')` (cuDNN on GPU; on CPU, in --smoke, the XLA block) under strict kernels
(benchmarks/perf/common.py): a cuDNN fallback is an error, and every line carries the kernel paths it took.

CPU lines (fwd+bwd, fp32, XLA block kernel):
  balance_analytic   slowest/mean block work per device, zigzag vs contiguous (goal ≤ 1.10)
  balance_timed      the same from timing each device's program (the ring minus communication)
  ring_overhead      ring on 8 fake devices / the same block-kernel calls without the ring (goal ≤ 1.10)
  latent_vs_expanded collective-permute bytes per device from the compiled HLO and times, latent vs expanded
  latent_crossover   cost model: per-device block length below which latent passing wins, by local heads and link
On CPU the 8 fake devices share the same 2 cores, so times measure total work (the ring's extra arithmetic and
copies), not the overlap of transfers with compute; that needs the GPU run.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time

if "--gpu" not in sys.argv:  # 8 fake CPU devices; must precede the jax import
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from benchmarks.perf.common import add_strict_flag, apply_strict, emit
from composer2_jax.model import context_parallel as cp
from composer2_jax.model import kernels
from composer2_jax.model.ring_attention import (
    device_work,
    ring_attention,
    ring_mla_attention,
)

KIMI_K2 = dict(heads=64, nope=128, rope=64, v=128, rank=512)  # MLA dims of Kimi K2 / DeepSeek-V3
H200 = dict(attn_flops=577e12,  # cuDNN causal fwd+bwd, measured (docs/design.md facts table, upper end)
            nvlink_Bps=450e9,  # ASSUMED: NVLink 4 per-direction bandwidth per GPU (900 GB/s bidirectional)
            ib_Bps=50e9)  # ASSUMED: one 400 Gb/s NDR InfiniBand NIC per GPU (inter-node ring hop)


def timed(fn, *args, reps: int = 5) -> float:
    """Best-of-reps wall seconds of a jitted call (after a compile run)."""
    jax.block_until_ready(fn(*args))
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t0)
    return best


def normal(key, shape, dtype=jnp.float32):
    return jax.random.normal(jax.random.key(key), shape, jnp.float32).astype(dtype)


def context_mesh(n: int):
    """A mesh with only the context axis > 1 (other axes 1)."""
    from composer2_jax.sharding import make_mesh

    return make_mesh({"context": n}, devices=jax.devices()[:n])


# ----------------------------------------------------------------------------------------------- balance


def balance_analytic():
    """Slowest/mean of the analytic per-device (q, k) pairs, for a fused causal kernel and the XLA block."""
    for layout in ("zigzag", "contiguous"):
        for fused in (True, False):
            ratios = {n: max(w) / np.mean(w) for n in (2, 4, 8, 16, 32)
                      for w in [cp.device_block_pairs(n, layout, True, fused)]}
            emit(bench="balance_analytic", layout=layout, diagonal_block="fused_causal" if fused else "xla_full",
                 slowest_over_mean={str(n): round(r, 4) for n, r in ratios.items()})


def device_grads(n, i, layout):
    """jit of device i's ring program (fwd+bwd) with the communication removed."""
    options = cp.ContextOptions(layout=layout, block_kernel="xla")
    return jax.jit(lambda q, k, v, do: device_work(i, q, k, v, do, options=options))


def timed_interleaved(fns, args, rounds: int = 6) -> list[float]:
    """Best-of-rounds seconds of several jitted calls, timed round-robin (fair under a noisy shared CPU)."""
    for f in fns:
        jax.block_until_ready(f(*args))
    best = [math.inf] * len(fns)
    for _ in range(rounds):
        for j, f in enumerate(fns):
            t0 = time.perf_counter()
            jax.block_until_ready(f(*args))
            best[j] = min(best[j], time.perf_counter() - t0)
    return best


def local_inputs(n, t_local, shape):
    """Device-local q, the n distinct KV blocks it receives ([n, B, T/n, H, ·]) and an output cotangent."""
    b, h, k, v = shape
    return normal(0, (b, t_local, h, k)), normal(1, (n, b, t_local, h, k)), normal(2, (n, b, t_local, h, v)), \
        normal(3, (b, t_local, h, v))


def balance_timed(n: int, t_local: int, shape) -> dict:
    """Per-device program times (fwd+bwd, no communication) for each layout."""
    args = local_inputs(n, t_local, shape)
    out = {}
    for layout in ("zigzag", "contiguous"):
        times = timed_interleaved([device_grads(n, i, layout) for i in range(n)], args, rounds=15)
        out[layout] = times
        emit(bench="balance_timed", layout=layout, n=n, t_local=t_local, fwd_bwd=True,
             per_device_ms=[round(1e3 * x, 2) for x in times], slowest_over_mean=round(max(times) / np.mean(times), 3))
    return out


# ----------------------------------------------------------------------------------------------- overhead


def single_kernel_equal_work(n: int, t_local: int, shape):
    """jit of ONE XLA block call (fwd+bwd) with the pairs a zigzag device computes: T/n × (n+1)·T/2n keys."""
    b, h, k, v = shape
    s_eq = (n + 1) * t_local // 2  # diagonal block computed whole + (n−1) half blocks
    kk, vv = normal(1, (b, s_eq, h, k)), normal(2, (b, s_eq, h, v))

    def run(q, _k, _v, do):
        o, lse = kernels.xla_fwd(q, kk, vv, k ** -0.5, False)
        delta = jnp.sum(do * o, -1)
        return o, *kernels.xla_bwd(q, kk, vv, kernels.BlockGrad(o, lse, do, delta), k ** -0.5, False)

    return jax.jit(run)


def ring_loss_grad(mesh, latent=False, **kw):
    """jit grad of sum(out·ct) through the ring (expanded or latent) on `mesh` with the XLA block kernel."""
    options = cp.ContextOptions.on(mesh, block_kernel="xla")

    def loss(*a):
        if latent:
            q, ckv, kr, w, ct = a
            return jnp.sum(ring_mla_attention(q, ckv, kr, w, options=options, **kw) * ct)
        q, k, v, ct = a
        return jnp.sum(ring_attention(q, k, v, options=options, **kw) * ct)

    n_args = 4 if latent else 3
    return jax.jit(jax.grad(loss, argnums=tuple(range(n_args))))


def ring_overhead(n: int, t_local: int, shape, device_times):
    """Device program vs one kernel call of equal work; ring on n fake devices vs its device programs and dense."""
    args = local_inputs(n, t_local, shape)
    t_prog, t_kernel = timed_interleaved([device_grads(n, n // 2, "zigzag"),
                                          single_kernel_equal_work(n, t_local, shape)], args)
    b, h, k, v = shape
    t = n * t_local
    q, kk, vv, ct = normal(0, (b, t, h, k)), normal(1, (b, t, h, k)), normal(2, (b, t, h, v)), normal(3, (b, t, h, v))
    from composer2_jax.model.attention import xla_attention

    dense = jax.jit(jax.grad(lambda q, k, v, c: jnp.sum(xla_attention(q, k, v, scale=k.shape[-1] ** -0.5) * c),
                             argnums=(0, 1, 2)))
    t_ring, t_dense = timed_interleaved([ring_loss_grad(context_mesh(n)), dense], (q, kk, vv, ct), rounds=1)
    t_progs = float(sum(device_times))
    emit(bench="ring_overhead", n=n, t_local=t_local, global_t=t, fwd_bwd=True,
         device_program_ms=round(1e3 * t_prog, 2), single_kernel_equal_work_ms=round(1e3 * t_kernel, 2),
         device_program_over_single_kernel=round(t_prog / t_kernel, 3),
         ring_ms=round(1e3 * t_ring, 2), sum_device_programs_ms=round(1e3 * t_progs, 2),
         ring_over_sum_device_programs=round(t_ring / t_progs, 3),
         dense_xla_ms=round(1e3 * t_dense, 2), ring_over_dense_xla=round(t_ring / t_dense, 3),
         note="device_program = one device's ring minus communication (merges, conds, slicing included); "
              "the CPU ring adds the 8 fake devices' per-step rendezvous on 2 shared cores")


# ----------------------------------------------------------------------------------------------- latent vs expanded


def permute_bytes(lowered) -> int:
    """Bytes sent per device by collective-permutes in a lowered SPMD program (StableHLO text)."""
    total = 0
    for m in re.finditer(r"stablehlo\.collective_permute.*?->\s*tensor<([0-9x]+)x(f32|bf16|f16|i32)>",
                         lowered.as_text()):
        dims, dt = m.group(1), m.group(2)
        total += math.prod(int(d) for d in dims.split("x")) * (2 if dt in ("bf16", "f16") else 4)
    return total


def latent_vs_expanded(n: int, t_local: int):
    """Measured: ring permute bytes and fwd+bwd time, latent vs expanded, at small MLA dims; plus Kimi K2 counts."""
    h, nope, r, vd, rank, b = 8, 32, 16, 32, 64, 1
    t = n * t_local
    mesh = context_mesh(n)
    q, ct = normal(0, (b, t, h, nope + r)), normal(3, (b, t, h, vd))
    ckv, kr, w = normal(1, (b, t, rank)), normal(2, (b, t, r)), 0.1 * normal(4, (rank, h, nope + vd))
    k, v = cp.expand_latent(ckv, kr, w, nope)
    exp_fn, lat_fn = ring_loss_grad(mesh), ring_loss_grad(mesh, latent=True)
    exp_bytes = permute_bytes(exp_fn.lower(q, k, v, ct))
    lat_bytes = permute_bytes(lat_fn.lower(q, ckv, kr, w, ct))
    t_exp, t_lat = (timed_interleaved([f], a, rounds=5)[0] for f, a in ((exp_fn, (q, k, v, ct)),
                                                                          (lat_fn, (q, ckv, kr, w, ct))))
    kimi_exp = KIMI_K2["heads"] * (KIMI_K2["nope"] + KIMI_K2["rope"] + KIMI_K2["v"])
    kimi_lat = KIMI_K2["rank"] + KIMI_K2["rope"]
    emit(bench="latent_vs_expanded", n=n, t_local=t_local, dims=dict(heads=h, nope=nope, rope=r, v=vd, rank=rank),
         fwd_bwd=True, permute_bytes_per_device=dict(expanded=exp_bytes, latent=lat_bytes),
         bytes_ratio_expanded_over_latent=round(exp_bytes / lat_bytes, 2),
         values_per_token_toy=dict(expanded=h * (nope + r + vd), latent=rank + r),
         ms=dict(expanded=round(1e3 * t_exp, 2), latent=round(1e3 * t_lat, 2)),
         latent_over_expanded_time=round(t_lat / t_exp, 3),
         kimi_k2_values_per_token=dict(expanded=kimi_exp, latent=kimi_lat, ratio=round(kimi_exp / kimi_lat, 1)))


def step_costs(t_local: int, heads: int, phase: str, d=KIMI_K2):
    """Per ring step (zigzag, s ≥ 1) for one device: attention FLOPs, latent re-projection FLOPs, bytes sent."""
    k, v, rank, nope, rope = d["nope"] + d["rope"], d["v"], d["rank"], d["nope"], d["rope"]
    attn = heads * (k + v) * t_local ** 2  # 2·h·(K+V) per pair × T²/2 pairs (half a block per step)
    proj = 2 * rank * heads * (nope + v) * 0.75 * t_local  # expand the rows used: T/2 or T, 3T/4 on average
    exp_b, lat_b = t_local * heads * (k + v) * 2, t_local * (rank + rope) * 2  # bf16 blocks
    if phase == "bwd":  # FA-2 backward ≈ 2.5× forward; latent: expand + d(latent) + dW = 3×; fp32 grads return too
        attn, proj, exp_b, lat_b = 2.5 * attn, 3 * proj, 3 * exp_b, 3 * lat_b
    return attn, proj, exp_b, lat_b


def step_time(t_local: int, heads: int, phase: str, flops: float, bw: float, latent: bool) -> float:
    """Seconds per ring step under perfect overlap: max(compute / F, bytes / BW)."""
    attn, proj, exp_b, lat_b = step_costs(t_local, heads, phase)
    return max((attn + proj) / flops, lat_b / bw) if latent else max(attn / flops, exp_b / bw)


def crossover_tokens(heads: int, flops: float, bw: float, phase: str) -> int:
    """Largest per-device length T (grid 2^(1/32)) at which latent passing is faster per step (0 = never)."""
    best = 0
    for t in sorted({int(round(2 ** (e / 32))) for e in range(6 * 32, 20 * 32)}):
        if step_time(t, heads, phase, flops, bw, True) < step_time(t, heads, phase, flops, bw, False):
            best = t
    return best


def latent_crossover():
    """Cost-model crossover for Kimi K2 MLA dims by local heads (64 / tensor parallel) and ring link."""
    f = H200["attn_flops"]
    k_plus_v = KIMI_K2["nope"] + KIMI_K2["rope"] + KIMI_K2["v"]
    for link, bw in (("nvlink_450GBps", H200["nvlink_Bps"]), ("ib_50GBps", H200["ib_Bps"])):
        rows = {str(h): {p: crossover_tokens(h, f, bw, p) for p in ("fwd", "bwd")} for h in (1, 2, 4, 8, 16, 64)}
        gain = {str(h): {str(t): round(step_time(t, h, "bwd", f, bw, False) / step_time(t, h, "bwd", f, bw, True), 2)
                         for t in (512, 2048, 8192, 32768)} for h in (2, 8, 64)}
        attn, proj, _, _ = step_costs(32768, 64, "fwd")
        emit(bench="latent_crossover", model="kimi_k2_mla", link=link, flops=f,
             latent_wins_below_tokens_per_device=rows,
             closed_form_fwd=round(2 * f / bw - 1.5 * KIMI_K2["rank"] * (KIMI_K2["nope"] + KIMI_K2["v"]) / k_plus_v),
             bwd_step_speedup_latent_over_expanded=gain, reprojection_flops_fraction_at_32k=round(proj / attn, 4),
             note="analytic: t_step = max(FLOPs/F, bytes/BW) with perfect overlap; links are assumptions")


# ----------------------------------------------------------------------------------------------- GPU


def gpu_block_check(smoke: bool):
    """The backend's block kernel (cuDNN on GPU) vs the XLA block: forward (o, lse) and backward with the global o/lse,
    causal / segments / both; max abs errors (the XLA block in fp32 from the same bf16 inputs is the reference)."""
    blk = kernels.get_block_kernel("auto")
    t, h, k, v = (64, 2, 64, 32) if smoke else (1024, 8, 192, 128)
    dt = jnp.bfloat16
    q, kk, vv, do = normal(0, (1, t, h, k), dt), normal(1, (1, t, h, k), dt), normal(2, (1, t, h, v), dt), \
        normal(3, (1, t, h, v), dt)
    seg = jnp.asarray(np.repeat(np.arange(4), t // 4)[None], jnp.int32)
    for causal, segs in ((True, (None, None)), (False, (seg, seg)), (True, (seg, seg))):
        o_x, l_x = kernels.xla_fwd(q, kk, vv, 0.1, causal, *segs)
        o_c, l_c = jax.jit(blk.fwd, static_argnums=(3, 4))(q, kk, vv, 0.1, causal, *segs)
        delta = jnp.sum(do.astype(jnp.float32) * o_x, -1)
        res = kernels.BlockGrad(o_x, l_x, do, delta)
        g_x = kernels.xla_bwd(q, kk, vv, res, 0.1, causal, *segs)
        g_c = jax.jit(blk.bwd, static_argnums=(4, 5))(q, kk, vv, res, 0.1, causal, *segs)
        err = lambda a, b: float(jnp.max(jnp.abs(a.astype(jnp.float32) - b.astype(jnp.float32))))  # noqa: E731
        emit(bench="gpu_block_check", kernel=blk.name, causal=causal, segments=segs[0] is not None, t=t, qk_dim=k,
             v_dim=v, lse_dtype=str(l_c.dtype),
             max_abs_err=dict(o=err(o_c, o_x), lse=err(l_c, l_x), dq=err(g_c[0], g_x[0]), dk=err(g_c[1], g_x[1]),
                              dv=err(g_c[2], g_x[2])))


def attn_flops(t: int, h: int, k: int, v: int, causal=True, fwd_bwd=False) -> float:
    """Useful attention FLOPs: 2·h·(K+V)·pairs, pairs = T²/2 causal; backward counted as 2.5× forward."""
    f = 2 * h * (k + v) * t * t * (0.5 if causal else 1.0)
    return f * 3.5 if fwd_bwd else f


def gpu_block_tflops(smoke: bool, lengths=(8192, 32768)):
    """Ring block kernel (cuDNN fwd with lse, fused bwd from the global o/lse) vs jax.nn cuDNN, causal MLA heads
    (qk head dim 192 = 128 + 64 rope, v 128, as gpu_small)."""
    blk = kernels.get_block_kernel("auto")
    h, k, v = (2, 64, 32) if smoke else (16, 192, 128)  # gpu_small attention heads
    for t in ((128,) if smoke else lengths):
        q, kk, vv, do = (normal(i, (1, t, h, d), jnp.bfloat16) for i, d in enumerate((k, k, v, v)))

        def ring_block(q, kk, vv, do):
            o, lse = blk.fwd(q, kk, vv, k ** -0.5, True)
            delta = jnp.sum(do.astype(jnp.float32) * o, -1)
            return blk.bwd(q, kk, vv, kernels.BlockGrad(o, lse, do, delta), k ** -0.5, True)

        def ceiling(q, kk, vv, do):
            vp = jnp.pad(vv, ((0, 0), (0, 0), (0, 0), (0, k - v)))
            impl = "cudnn" if jax.default_backend() == "gpu" else "xla"

            def f(*a):
                o = jax.nn.dot_product_attention(*a, is_causal=True, implementation=impl)[..., :v]
                return jnp.sum(o.astype(jnp.float32) * do)

            return jax.grad(f, argnums=(0, 1, 2))(q, kk, vp)

        fwd = jax.jit(lambda *a: blk.fwd(*a, k ** -0.5, True))
        t_fwd, t_blk, t_ceil = timed(fwd, q, kk, vv), timed(jax.jit(ring_block), q, kk, vv, do), \
            timed(jax.jit(ceiling), q, kk, vv, do)
        emit(bench="gpu_block_tflops", kernel=blk.name, t=t, heads=h, qk_dim=k, v_dim=v,
             block_fwd_tflops=round(attn_flops(t, h, k, v) / t_fwd / 1e12, 1),
             block_fwd_bwd_tflops=round(attn_flops(t, h, k, v, fwd_bwd=True) / t_blk / 1e12, 1),
             cudnn_fwd_bwd_tflops=round(attn_flops(t, h, k, v, fwd_bwd=True) / t_ceil / 1e12, 1),
             block_over_ceiling_time=round(t_blk / t_ceil, 3))


def gpu_device_program(smoke: bool):
    """One device's 8-way zigzag ring program (no comm) vs one cuDNN call: useful TFLOP/s, fwd+bwd."""
    n, h, k, v = 8, *((2, 64, 32) if smoke else (16, 192, 128))
    t_local = 128 if smoke else 32768
    q, do = normal(0, (1, t_local, h, k), jnp.bfloat16), normal(3, (1, t_local, h, v), jnp.bfloat16)
    kk, vv = normal(1, (n, 1, t_local, h, k), jnp.bfloat16), normal(2, (n, 1, t_local, h, v), jnp.bfloat16)
    t_prog = timed(jax.jit(lambda *a: device_work(3, *a)), q, kk, vv, do, reps=3)  # n = 8 KV blocks in kk, vv
    useful = attn_flops(t_local, h, k, v, fwd_bwd=True) * n  # n/2 blocks of T_local² pairs = n × causal(T_local)
    emit(bench="gpu_device_program", kernel=kernels.get_block_kernel("auto").name, n=n, t_local=t_local, heads=h,
         ms=round(1e3 * t_prog, 1),
         useful_tflops=round(useful / t_prog / 1e12, 1))


MODEL_STEP_SEQ = 65536  # default --seq of the model step: fits one H200 (tests/test_gpu_fit.py); 262144 by flag


def model_step_config(smoke: bool, seq: int):
    """The model step's config: gpu_small (toy in --smoke), ring kernel = one fused block on one device."""
    import dataclasses

    from composer2_jax.model_config import get_model_config

    cfg = get_model_config("toy" if smoke else "gpu_small", attention_kernel="ring", remat_policy="full",
                           dtype="bfloat16")
    return dataclasses.replace(cfg, max_position_embeddings=max(cfg.max_position_embeddings, seq))


def model_step_loss(cfg):
    """loss(params, other_variables, tok) of the model step: mean next-token CE, the LM head 8192 tokens at a time."""
    from composer2_jax.model import Transformer

    def loss(p, rest, tok):
        seq = tok.shape[1]
        chunk = min(seq, 8192)
        out = Transformer(cfg).apply(dict(rest, params=p), tok, compute_logits=False)
        w = p["lm_head"].astype(jnp.bfloat16)

        @jax.checkpoint
        def ce(x_TD, y_T):
            logits = jnp.dot(x_TD, w, preferred_element_type=jnp.float32)
            return jnp.sum(jax.nn.logsumexp(logits, -1) - jnp.take_along_axis(logits, y_T[:, None], -1)[:, 0])

        xs = out.normed[0].reshape(seq // chunk, chunk, -1)
        ys = jnp.roll(tok[0], -1).reshape(seq // chunk, chunk)
        return jnp.sum(jax.lax.map(lambda a: ce(*a), (xs, ys))) / seq

    return loss


def gpu_model_step(smoke: bool, seq: int):
    """fwd+bwd of the gpu_small model on one GPU at `seq` tokens: attention_kernel='ring' = one fused block."""
    from flax import linen as nn

    from composer2_jax.model import Transformer

    cfg = model_step_config(smoke, seq)
    tok = jax.random.randint(jax.random.key(0), (1, seq), 0, cfg.vocab_size, dtype=jnp.int32)
    variables = jax.jit(lambda k: nn.unbox(Transformer(cfg).init(k, tok[:, :128])))(jax.random.key(1))
    params, rest = variables["params"], {k: v for k, v in variables.items() if k != "params"}
    step = jax.jit(jax.value_and_grad(model_step_loss(cfg)))
    t0 = time.perf_counter()
    jax.block_until_ready(step(params, rest, tok))
    compile_s = time.perf_counter() - t0
    t_step = timed(step, params, rest, tok, reps=2)
    stats = jax.devices()[0].memory_stats() or {}
    emit(bench="gpu_model_step", preset="toy" if smoke else "gpu_small", seq=seq, step_s=round(t_step, 3),
         first_call_s=round(compile_s, 1), peak_gib=round(stats.get("peak_bytes_in_use", 0) / 2 ** 30, 1),
         attention_tflop_fwd_bwd=round(cfg.num_layers * attn_flops(seq, cfg.num_heads, cfg.qk_head_dim,
                                                                   cfg.v_head_dim, fwd_bwd=True) / 1e12, 1))


# ----------------------------------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", action="store_true", help="H200 mode (block kernels, 64k gpu_small step)")
    ap.add_argument("--smoke", action="store_true", help="with --gpu: toy sizes, runs anywhere")
    ap.add_argument("--stage", default="all", choices=("all", "check", "tflops", "device_program", "model_step"),
                    help="--gpu: run one stage only")
    ap.add_argument("--t", type=int, nargs="+", default=[8192, 32768], help="--gpu tflops: block lengths")
    ap.add_argument("--seq", type=int, default=MODEL_STEP_SEQ,
                    help="--gpu model step length (the default fits one H200; 262144 does not, "
                         "benchmarks/RESULTS.md)")
    add_strict_flag(ap)
    args = ap.parse_args()
    apply_strict(args)
    emit(bench="env", backend=jax.default_backend(), devices=len(jax.devices()), jax=jax.__version__,
         auto_block_kernel=kernels.get_block_kernel("auto").name)
    if args.gpu:
        stages = {"check": lambda: gpu_block_check(args.smoke),
                  "tflops": lambda: gpu_block_tflops(args.smoke, tuple(args.t)),
                  "device_program": lambda: gpu_device_program(args.smoke),
                  "model_step": lambda: gpu_model_step(args.smoke, 256 if args.smoke else args.seq)}
        for name, run in stages.items():
            if args.stage in ("all", name):
                run()
        return
    n, t_local, shape = 8, 512, (1, 2, 64, 64)  # (B, H, K, V)
    balance_analytic()
    times = balance_timed(n, t_local, shape)
    ring_overhead(n, t_local, shape, times["zigzag"])
    latent_vs_expanded(n, 256)
    latent_crossover()


if __name__ == "__main__":
    main()
