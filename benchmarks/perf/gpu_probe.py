"""First stage of the GPU suite: the environment and the kernel paths, in seconds, before anything is timed.

    python -m benchmarks.perf.gpu_probe              # on the GPU: fails unless the backend is 'gpu'
    python -m benchmarks.perf.gpu_probe --smoke      # the same calls on CPU (XLA block kernel)

Lines: `probe_env` (versions, backend, device, memory limit, which optional packages are absent) and one
`probe_block` per case — the backend's block kernel (cuDNN on GPU) at T = 256, qk head 192 / v 128 (gpu_small's
MLA dims), bf16, forward and backward jitted, with and without segment ids, under strict kernels: a cuDNN
fallback or a refused compile fails here, in seconds, naming its reason. Plus `probe_gmm`: the padded grouped matmul.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.perf.common import add_strict_flag, apply_strict, emit
from composer2_jax.model import grouped_matmul, kernels

OPTIONAL = ("grain", "seqio", "tensorboardX", "tiktoken", "ml_collections", "orbax.checkpoint", "optax", "flax")


def _version(name: str) -> str:
    try:
        return importlib.import_module(name).__version__
    except Exception as e:  # noqa: BLE001 — reported, not raised: this line is diagnostics
        return f"unavailable ({type(e).__name__})"


def env_line():
    """Versions, backend, device, memory limit and the absent optional packages."""
    dev = jax.devices()[0]
    stats = dev.memory_stats() or {}
    absent = [m for m in OPTIONAL if importlib.util.find_spec(m.split(".")[0]) is None]
    emit(bench="probe_env", python=sys.version.split()[0], jax=jax.__version__, flax=_version("flax"),
         backend=jax.default_backend(), device=dev.device_kind, devices=jax.device_count(),
         bytes_limit_gb=round(stats.get("bytes_limit", 0) / 1e9, 1), absent_packages=absent,
         auto_block_kernel=kernels.get_block_kernel("auto").name)


def block_case(segments: bool, t: int = 256, h: int = 4, k: int = 192, v: int = 128):
    """Block kernel fwd+bwd (jitted) against the XLA block in fp32 from the same bf16 inputs: max abs errors."""
    blk = kernels.get_block_kernel("auto")
    keys = jax.random.split(jax.random.key(0), 4)
    q, kk = (jax.random.normal(x, (1, t, h, k), jnp.float32).astype(jnp.bfloat16) for x in keys[:2])
    vv, do = (jax.random.normal(x, (1, t, h, v), jnp.float32).astype(jnp.bfloat16) for x in keys[2:])
    seg = jnp.asarray(np.repeat(np.arange(4), t // 4)[None], jnp.int32) if segments else None
    scale = k ** -0.5

    def run(fwd, bwd, q, kk, vv, do, seg):
        o, lse = fwd(q, kk, vv, scale, True, seg, seg)
        delta = jnp.sum(do.astype(jnp.float32) * o, -1)
        return (o, lse) + tuple(bwd(q, kk, vv, kernels.BlockGrad(o, lse, do, delta), scale, True, seg, seg))

    got = jax.jit(lambda *a: run(blk.fwd, blk.bwd, *a))(q, kk, vv, do, seg)
    ref = run(kernels.xla_fwd, kernels.xla_bwd, q, kk, vv, do, seg)
    errs = {n: float(jnp.max(jnp.abs(a.astype(jnp.float32) - b.astype(jnp.float32))))
            for n, a, b in zip(("o", "lse", "dq", "dk", "dv"), got, ref, strict=True)}
    emit(bench="probe_block", kernel=blk.name, segments=segments, t=t, qk_dim=k, v_dim=v,
         lse_dtype=str(got[1].dtype), max_abs_err=errs)


def gmm_case():
    """The padded grouped matmul at a tiny balanced size (the GPU default for experts)."""
    e, rows, d, f = 8, 1024, 256, 128
    x = jax.random.normal(jax.random.key(1), (rows, d), jnp.bfloat16)
    w = jax.random.normal(jax.random.key(2), (e, d, f), jnp.bfloat16)
    sizes = jnp.full((e,), rows // e, jnp.int32)
    impl = grouped_matmul.resolve_impl("auto")
    y = jax.jit(lambda *a: grouped_matmul.grouped_matmul(*a, impl=impl, capacity=rows // e))(x, w, sizes)
    ref = jax.lax.ragged_dot(x.astype(jnp.float32), w.astype(jnp.float32), sizes)
    emit(bench="probe_gmm", impl=impl, max_abs_err=float(jnp.max(jnp.abs(y.astype(jnp.float32) - ref))),
         max_abs_ref=float(jnp.max(jnp.abs(ref))))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="any backend (default: require 'gpu')")
    add_strict_flag(ap)
    a = ap.parse_args(argv)
    apply_strict(a)
    env_line()
    if not a.smoke and jax.default_backend() != "gpu":
        raise SystemExit(f"gpu_probe: backend is {jax.default_backend()!r}, expected 'gpu' (use --smoke elsewhere)")
    block_case(False)
    block_case(True)
    gmm_case()


if __name__ == "__main__":
    main()
