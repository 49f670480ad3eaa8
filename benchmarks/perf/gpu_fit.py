"""Sizes that fit, proven on CPU: every `--gpu` benchmark program compiled for its real shapes, peak vs one H200.

    python -m benchmarks.perf.gpu_fit                  # all programs, one JSON line each (minutes on 2 CPU cores)
    python -m benchmarks.perf.gpu_fit model_step train # some of them

Method (as composer2_jax/plan/step.py): `jax.jit(f).lower(abstract inputs).compile().memory_analysis()` on the CPU
backend; peak = arguments + outputs − aliased + temporaries. Where the GPU runs a fused kernel that the CPU lacks,
the compile uses the planner's stand-in (`planning.accelerator_kernels()`: the query-chunked XLA block for cuDNN's
flash attention — O(512·S) logits where cuDNN keeps O(tile) — and the padded grouped matmul that 'auto' picks on
GPU), with strict kernels on as in the benchmarks (no ragged branch compiled). XLA:CPU keeps some bf16 work in
fp32 (plan/calibration.py: CPU_MEMORY_OVERESTIMATE), so the figure is an upper bound of the device's need.

Budget = the H200's 141 GB × MEM_FRACTION, the preallocation fraction the GPU suite sets
(XLA_PYTHON_CLIENT_MEM_FRACTION). tests/test_gpu_fit.py asserts peak ≤ budget for every default.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
from flax import linen as nn

from composer2_jax import chips
from composer2_jax.model import kernel_paths, planning

MEM_FRACTION = 0.90  # XLA_PYTHON_CLIENT_MEM_FRACTION that benchmarks/perf/gpu_suite.py sets for every stage
H200_BYTES = chips.get_chip("h200").hbm_bytes


def budget_bytes() -> float:
    """What one H200 stage may use: HBM × the preallocation fraction."""
    return H200_BYTES * MEM_FRACTION


def peak_bytes(compiled) -> int:
    """Peak device bytes of a compiled program: arguments + outputs − aliased + temporaries."""
    m = compiled.memory_analysis()
    return m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes + m.temp_size_in_bytes


@contextlib.contextmanager
def _as_on_gpu():
    """Trace as the GPU run would: accelerator stand-in kernels, strict kernels."""
    before = kernel_paths.is_strict()
    kernel_paths.set_strict(True)
    try:
        with planning.accelerator_kernels():
            yield
    finally:
        kernel_paths.set_strict(before)


def _sds(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype)


def _abstract_variables(module, *example):
    """Unboxed abstract variables of `module.init(key, *example)`: (params, the other collections)."""
    v = nn.unbox(jax.eval_shape(lambda k: module.init(k, *example), jax.random.key(0)))
    return v["params"], {k: x for k, x in v.items() if k != "params"}


def block_tflops(t: int = 32768):
    """benchmarks/perf/ring_kernels.py --stage tflops at its largest length: block fwd+bwd, gpu_small heads."""
    from composer2_jax.model import kernels

    h, k, v = 16, 192, 128
    blk = kernels.get_block_kernel("auto")

    def ring_block(q, kk, vv, do):
        o, lse = blk.fwd(q, kk, vv, k ** -0.5, True)
        delta = jnp.sum(do.astype(jnp.float32) * o, -1)
        return blk.bwd(q, kk, vv, kernels.BlockGrad(o, lse, do, delta), k ** -0.5, True)

    args = [_sds((1, t, h, d), jnp.bfloat16) for d in (k, k, v, v)]
    return jax.jit(ring_block).lower(*args).compile()


def device_program(n: int = 8, t_local: int = 32768):
    """benchmarks/perf/ring_kernels.py --stage device_program: one device's 8-way zigzag ring, fwd+bwd."""
    from composer2_jax.model.ring_attention import device_work

    h, k, v = 16, 192, 128
    args = (_sds((1, t_local, h, k), jnp.bfloat16), _sds((n, 1, t_local, h, k), jnp.bfloat16),
            _sds((n, 1, t_local, h, v), jnp.bfloat16), _sds((1, t_local, h, v), jnp.bfloat16))
    return jax.jit(lambda *a: device_work(3, *a)).lower(*args).compile()  # n: the KV blocks stacked in args


def model_step(seq: int | None = None):
    """benchmarks/perf/ring_kernels.py --stage model_step: gpu_small fwd+bwd at `seq` tokens (default: the bench's)."""
    import dataclasses

    from benchmarks.perf.ring_kernels import MODEL_STEP_SEQ, model_step_config, model_step_loss
    from composer2_jax.model import Transformer

    seq = seq or MODEL_STEP_SEQ
    cfg = dataclasses.replace(model_step_config(False, seq), moe_gmm_impl="padded")  # what 'auto' is on GPU
    params, rest = _abstract_variables(Transformer(cfg), jnp.zeros((1, 128), jnp.int32))
    tok = _sds((1, seq), jnp.int32)
    return jax.jit(jax.value_and_grad(model_step_loss(cfg))).lower(params, rest, tok).compile()


TRAIN_GPU = dict(preset="gpu_small", seq_len=8192, batch=1, optimizer="adamw")  # the suite's train stage


def train(preset=TRAIN_GPU["preset"], seq_len=TRAIN_GPU["seq_len"], batch=TRAIN_GPU["batch"],
          optimizer=TRAIN_GPU["optimizer"]):
    """benchmarks/perf/train_stack.py on one GPU: the real train step (optimizer state, donated) with attention
    'ring'."""
    import dataclasses

    from benchmarks.perf.train_stack import train_config
    from composer2_jax import sharding as shd
    from composer2_jax.plan.step import compile_train_step

    cfg = dataclasses.replace(train_config(preset, "", "ring"), moe_gmm_impl="padded")
    mesh = shd.make_mesh({"fsdp": 1}, devices=jax.devices()[:1])
    compiled, _ = compile_train_step(cfg, mesh, batch, seq_len, optimizer)
    return compiled


def moe_layer():
    """benchmarks/perf/moe_dispatch.py --gpu: the MoE layer fwd+bwd at its GPU sizes (dropless, padded grouped
    matmul)."""
    from benchmarks.perf.moe_dispatch import PRESETS
    from composer2_jax.model.moe import MoE
    from composer2_jax.model_config import get_model_config

    p = PRESETS["gpu"]["layer"]
    cfg = get_model_config("toy", hidden_size=p["d"], moe_intermediate_size=p["f"], n_routed_experts=p["e"],
                           num_experts_per_tok=p["k"], n_group=1, topk_group=1, n_shared_experts=1,
                           dtype="bfloat16", param_dtype="float32", num_heads=4, moe_impl="dropless",
                           moe_gmm_impl="padded")
    x = _sds((4, p["tokens"] // 4, p["d"]), jnp.bfloat16)
    moe = MoE(cfg)
    params, rest = _abstract_variables(moe, jnp.zeros(x.shape, x.dtype))

    def loss(params, rest, x):
        out = moe.apply(dict(rest, params=params), x)
        y = out[0] if isinstance(out, tuple) else out
        return jnp.sum(y.astype(jnp.float32))

    return jax.jit(jax.value_and_grad(loss, argnums=(0, 2))).lower(params, rest, x).compile()


DECODE_GPU = dict(batch=16, prompt_len=512, new_tokens=64, num_draft=2)  # the suite's decode stage, largest draft
# (tests/test_gpu_fit.py checks these against benchmarks/perf/gpu_suite.py and benchmarks/perf/decode.py)


def decode_static(batch=DECODE_GPU["batch"], prompt_len=DECODE_GPU["prompt_len"],
                  new_tokens=DECODE_GPU["new_tokens"], num_draft=DECODE_GPU["num_draft"], mtp_layers=None):
    """benchmarks/perf/decode.py --gpu (the suite's decode stage): the static Engine's one program — prefill, drafts and
    the device loop of rounds — for gpu_small bf16 with `num_draft` MTP depths, greedy, no stop sequences."""
    from composer2_jax.infer import SamplingParams
    from composer2_jax.infer.static_engine import GenProgram, Prompts, generate_tokens
    from composer2_jax.model import Transformer
    from composer2_jax.model.decoding import Decoder
    from composer2_jax.model_config import get_model_config

    cfg = get_model_config("gpu_small", num_mtp_layers=num_draft if mtp_layers is None else mtp_layers,
                           dtype="bfloat16", param_dtype="bfloat16", remat_policy="none", moe_gmm_impl="padded")
    params, rest = _abstract_variables(Transformer(cfg), jnp.zeros((1, 4), jnp.int32))
    b, i32, f32 = batch, jnp.int32, jnp.float32
    variables = {"params": params, "router_state": rest.get("router_state", {})}
    args = (variables, Prompts(_sds((b, prompt_len), i32), _sds((b,), i32), _sds((b,), jnp.bool_)),
            jax.eval_shape(lambda: jax.random.key(0)), _sds((), f32), _sds((), f32),
            (_sds((4, 4), i32), _sds((4,), i32)))  # stops: Engine._run's smallest bucket
    sp = SamplingParams(temperature=0.0, max_tokens=new_tokens)
    return generate_tokens.lower(*args, prog=GenProgram(Decoder(cfg), sp.warp(), new_tokens, num_draft)).compile()


def rollout_static(slots: int | None = None):
    """benchmarks/perf/rollout_vs_static.py --gpu --only both's static baseline: the static Engine at [slots, the
    longest
    context] with its largest reply bucket, no drafts, at the benchmark's GPU_STATIC_SLOTS rows unless `slots` says
    otherwise (at the rollout engine's 16 slots it does not fit one H200, benchmarks/RESULTS.md)."""
    from benchmarks.perf.rollout_vs_static import GPU_STATIC_SLOTS, gpu_setup

    _, wl, ecfg = gpu_setup()
    return decode_static(batch=slots or GPU_STATIC_SLOTS, prompt_len=ecfg.max_len, new_tokens=wl.reply_max, num_draft=0,
                         mtp_layers=0)


def _rollout_setup(num_draft: int):
    """The --gpu rollout engine's model, engine config, abstract variables and (abstract) page pools: the trunk's,
    and with drafting the MTP depths' and the h_0 pool (infer/paged_cache.py)."""
    from benchmarks.perf.rollout_vs_static import gpu_setup
    from composer2_jax.infer.paged_cache import init_draft_pools, init_pools
    from composer2_jax.model import Transformer
    from composer2_jax.model.layers import dtype_of

    cfg, _, ecfg = gpu_setup(num_draft)
    params, rest = _abstract_variables(Transformer(cfg), jnp.zeros((1, 4), jnp.int32))
    dt = dtype_of(cfg.dtype)
    pools = jax.eval_shape(lambda: init_pools(cfg, cfg.num_layers, ecfg.num_pages, ecfg.page_size, dt))
    draft = jax.eval_shape(lambda: init_draft_pools(cfg, num_draft, ecfg.num_pages, ecfg.page_size, dt)) \
        if num_draft else None
    return cfg, ecfg, params, rest.get("router_state", {}), pools, draft


def _row_sampling(b: int):
    """Per-row seed, session id, temperature and top-p of an engine program (infer/step.py `Rows`)."""
    from composer2_jax.infer.step import Rows

    return Rows(_sds((b,), jnp.uint32), _sds((b,), jnp.int32), _sds((b,), jnp.float32), _sds((b,), jnp.float32))


def _step_program(cfg):
    """The static part of an engine step program: the decoder and the benchmark's greedy warp."""
    from composer2_jax.infer import SamplingParams
    from composer2_jax.infer.step import StepProgram
    from composer2_jax.model.decoding import Decoder

    return StepProgram(Decoder(cfg), SamplingParams(temperature=0.0).warp())


def _rollout_step(rows_of, tokens_of, num_draft: int = 0):
    """benchmarks/perf/rollout_vs_static.py --gpu: RolloutEngine's fixed-shape step [rows, tokens] over its whole page
    pool
    (donated), greedy as the benchmark samples; with `num_draft`, the step also writes h_0 and runs the MTP depths
    over its [rows, tokens + 2D] block (the prefill program of a drafting engine)."""
    from composer2_jax.infer.step import MtpBlock, engine_step
    from composer2_jax.model.decoding import Feed

    cfg, ecfg, params, router_state, pools, draft = _rollout_setup(num_draft)
    b, t = rows_of(ecfg), tokens_of(ecfg)
    i32 = jnp.int32
    args = ({"params": params, "router_state": router_state}, pools,
            Feed(_sds((b, t), i32), _sds((b, t), i32), _sds((b, t), jnp.bool_)), _sds((b, ecfg.table_pages), i32),
            _row_sampling(b))
    if num_draft:
        width = t + 2 * num_draft
        args += (draft, MtpBlock(_sds((b, width, num_draft), i32), _sds((b, width), i32), _sds((b, width), jnp.bool_)))
    return engine_step.lower(*args, prog=_step_program(cfg)).compile()


def rollout_decode():
    """The rollout engine's decode program: [slots, 1] over the page pool."""
    return _rollout_step(lambda e: e.slots, lambda e: 1)


def rollout_prefill():
    """The rollout engine's prefill program: [prefill_rows, chunk] over the page pool."""
    return _rollout_step(lambda e: e.prefill_rows, lambda e: e.chunk)


def rollout_prefill_draft(num_draft: int | None = None):
    """--gpu --num-draft: the drafting engine's prefill program, [prefill_rows, chunk] over the trunk, MTP and h_0
    pools."""
    from benchmarks.perf.rollout_vs_static import GPU_NUM_DRAFT

    return _rollout_step(lambda e: e.prefill_rows, lambda e: e.chunk, num_draft or GPU_NUM_DRAFT)


def rollout_draft_decode(num_draft: int | None = None):
    """--gpu --num-draft: the drafting decode program — D drafts per slot from the MTP depths, verified by the trunk
    at [slots, 1 + D] — over the trunk, MTP and h_0 pools (all donated)."""
    from benchmarks.perf.rollout_vs_static import GPU_NUM_DRAFT
    from composer2_jax.infer.step import DraftRows, draft_step

    d = num_draft or GPU_NUM_DRAFT
    cfg, ecfg, params, router_state, pools, draft = _rollout_setup(d)
    b, i32 = ecfg.slots, jnp.int32
    rows_in = DraftRows(_sds((b, 3 * d), i32), _sds((b,), i32), _sds((b,), jnp.bool_), _sds((b,), i32))
    args = ({"params": params, "router_state": router_state}, pools, draft, rows_in, _sds((b, ecfg.table_pages), i32),
            _row_sampling(b))
    return draft_step.lower(*args, prog=_step_program(cfg)).compile()


PROGRAMS = {"block_tflops": block_tflops, "device_program": device_program, "moe_layer": moe_layer,
            "model_step": model_step, "train": train, "decode_static": decode_static,
            "rollout_decode": rollout_decode, "rollout_prefill": rollout_prefill, "rollout_static": rollout_static,
            "rollout_prefill_draft": rollout_prefill_draft, "rollout_draft_decode": rollout_draft_decode}


def fit(name: str, **kw) -> dict:
    """Compile one program as on the GPU and compare its peak with the budget: one JSON-ready record."""
    t0 = time.time()
    with _as_on_gpu():
        compiled = PROGRAMS[name](**kw)
    peak = peak_bytes(compiled)
    return dict(bench="gpu_fit", program=name, **kw, peak_gb=round(peak / 1e9, 2),
                budget_gb=round(budget_bytes() / 1e9, 2), mem_fraction=MEM_FRACTION, fits=bool(peak <= budget_bytes()),
                compile_s=round(time.time() - t0, 1), backend=jax.default_backend())


def main(argv=None):
    names = (argv if argv is not None else sys.argv[1:]) or list(PROGRAMS)
    for name in names:
        if name not in PROGRAMS:
            raise SystemExit(f"unknown program {name!r}; expected some of {sorted(PROGRAMS)}")
        print(json.dumps(fit(name)), flush=True)


if __name__ == "__main__":
    main()
