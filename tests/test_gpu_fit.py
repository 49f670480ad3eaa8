"""Sizes that fit, proven on CPU: each --gpu benchmark program, compiled for its real shapes as the GPU would run it
(benchmarks/gpu_fit.py), peaks within one H200 × the preallocation fraction the GPU suite sets."""

import pytest

from benchmarks import gpu_fit
from benchmarks.ring_attention import MODEL_STEP_SEQ


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
