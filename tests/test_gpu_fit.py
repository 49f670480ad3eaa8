"""Sizes that fit, proven on CPU: each --gpu benchmark program, compiled for its real shapes as the GPU would run it
(benchmarks/perf/gpu_fit.py), peaks within one H200 × the preallocation fraction the GPU suite sets."""

import pytest

from benchmarks.perf import gpu_fit
from benchmarks.perf.ring_kernels import MODEL_STEP_SEQ


def _check(name: str) -> dict:
    rec = gpu_fit.fit(name)
    budget = gpu_fit.H200_BYTES * gpu_fit.MEM_FRACTION
    assert rec["fits"], f"{name}: compiled peak {rec['peak_gb']} GB > budget {budget / 1e9:.1f} GB"
    assert rec["peak_gb"] * 1e9 <= budget
    return rec


def test_block_kernel_at_32k_fits():
    rec = _check("block_tflops")
    assert rec["peak_gb"] > 4 * 32768 * 16 * 192 * 2 / 1e9  # at least its bf16 inputs: the analysis is not empty


def test_moe_layer_fits():
    _check("moe_layer")


@pytest.mark.slow
def test_one_ring_device_program_fits():
    _check("device_program")


@pytest.mark.slow
def test_model_step_at_its_default_length_fits():
    """gpu_small fwd+bwd at 65,536 tokens (262,144 only by --seq)."""
    assert MODEL_STEP_SEQ == 65536
    rec = _check("model_step")
    assert rec["peak_gb"] > 6.5e9 * 4 * 2 / 1e9  # fp32 params in and their gradients out, at least


@pytest.mark.slow
def test_train_step_at_the_suite_sizes_fits():
    """gpu_small train step (adamw state, donated) at the suite's batch and length, fused attention."""
    rec = _check("train")
    assert rec["peak_gb"] > 6.5e9 * 4 * 3 / 1e9  # params + two Adam moments, at least


def test_decode_sizes_are_the_suite_decode_stage():
    """gpu_fit compiles the decode program at the sizes the suite's decode stage runs (no compile: fast)."""
    from benchmarks.perf import decode, gpu_suite

    (stage,) = [s for s in gpu_suite.STAGES if s.name == "decode"]
    assert stage.argv[0] == "benchmarks.perf.decode"
    args = decode.parser().parse_args(list(stage.argv[1:]))
    assert args.gpu and not args.smoke
    assert (args.batch, decode.GPU_PROMPT_LEN, args.new_tokens) == tuple(
        gpu_fit.DECODE_GPU[k] for k in ("batch", "prompt_len", "new_tokens"))
    assert gpu_fit.DECODE_GPU["num_draft"] == 2  # run_gpu's largest draft depth (d in (1, 2))


@pytest.mark.slow
def test_static_decode_program_of_the_suite_fits():
    """benchmarks/perf/decode.py --gpu: the static Engine's program (prefill + rounds) at batch 16, prompt 512, 64 new
    tokens, 2 MTP drafts."""
    rec = _check("decode_static")
    assert rec["peak_gb"] > 6.5e9 * 2 / 1e9  # bf16 params, at least


def _pool_bytes() -> int:
    from benchmarks.perf.rollout_vs_static import gpu_setup

    cfg, _, e = gpu_setup()
    return cfg.num_layers * e.num_pages * e.page_size * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * 2


@pytest.mark.slow
@pytest.mark.parametrize("program", ["rollout_decode", "rollout_prefill"])
def test_rollout_engine_programs_fit_with_their_page_pool(program):
    """benchmarks/perf/rollout_vs_static.py --gpu: the [16, 1] decode and [2, 256] prefill steps over the whole page
    pool
    (64 episodes at their longest context, ~16.6 GB of bf16 latents, donated)."""
    rec = _check(program)
    assert rec["peak_gb"] * 1e9 > 6.5e9 * 2 + _pool_bytes()  # bf16 params and the pool, at least


def _draft_pool_bytes() -> int:
    """The drafting engine's extra pools: D MTP depths' latents and the trunk's h_0 per cached token, bf16."""
    from benchmarks.perf.rollout_vs_static import GPU_NUM_DRAFT, gpu_setup

    cfg, _, e = gpu_setup(GPU_NUM_DRAFT)
    return e.num_pages * e.page_size * (GPU_NUM_DRAFT * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) + cfg.hidden_size) * 2


@pytest.mark.slow
@pytest.mark.parametrize("program", ["rollout_draft_decode", "rollout_prefill_draft"])
def test_drafting_rollout_engine_programs_fit_with_their_pools(program):
    """benchmarks/perf/rollout_vs_static.py --gpu --num-draft 2: the [16, 3] draft-and-verify decode and the [2, 256]
    prefill that also fills the MTP and h_0 pools, over the trunk's page pool and both draft pools (donated)."""
    rec = _check(program)
    assert rec["peak_gb"] * 1e9 > 6.5e9 * 2 + _pool_bytes() + _draft_pool_bytes()


@pytest.mark.slow
def test_rollout_benchmark_static_baseline_fits_at_its_gpu_rows():
    """benchmarks/perf/rollout_vs_static.py --gpu --only both: the static baseline's fixed [2, 18,736] program, 512 new
    tokens (at the engine's 16 slots it needs ~787 GB)."""
    from benchmarks.perf.rollout_vs_static import GPU_STATIC_SLOTS

    assert GPU_STATIC_SLOTS == 2
    rec = _check("rollout_static")
    assert rec["peak_gb"] > 6.5e9 * 2 / 1e9
