"""The configs a pod runs: memory-safe attention at long T, the planned configuration in every real preset's stage,
and `--dry_run` (compile the config as given on simulated devices, one JSON line)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from composer2_jax import schema
from composer2_jax.model.attention import MLAttention
from composer2_jax.model.attention_memory import DENSE_MAX_T, MEMORY_SAFE_KERNELS, check_attention_memory
from composer2_jax.model_config import get_model_config
from composer2_jax.rl import orchestrator
from composer2_jax.train.loop import stage_config
from experiments import cpt_bulk, cpt_long, plans, rl, sft

REPO = Path(__file__).resolve().parents[1]
STAGE_FILES = {"cpt_bulk": cpt_bulk, "cpt_long": cpt_long, "sft": sft}


def test_dense_kernel_at_long_t_is_refused_naming_kernel_t_and_bytes():
    with pytest.raises(ValueError) as e:
        check_attention_memory("xla", 32768, 2, 64)
    msg = str(e.value)
    need = 2 * 64 * 32768 * 32768 * 4  # fp32 [B, H, T, T]
    assert "'xla'" in msg and "T = 32768" in msg and f"{need:,} bytes" in msg
    assert all(k in msg for k in MEMORY_SAFE_KERNELS)
    check_attention_memory("xla", DENSE_MAX_T - 1, 2, 64)  # below the threshold: allowed
    for k in MEMORY_SAFE_KERNELS:
        check_attention_memory(k, 262144, 2, 64)


def test_stage_config_with_dense_kernel_at_8192_is_a_config_error_and_toy_keeps_working():
    c = cpt_bulk.get_config("gpu_small")
    c.model.attention_kernel = "xla"
    with pytest.raises(schema.ConfigError, match=r"'xla'.*T = 8192.*4,294,967,296 bytes"):
        stage_config(c)  # gpu_small: 1 sequence per micro-step (grad_accum 8), 16 heads: 4·16·8192² bytes
    toy = stage_config(cpt_bulk.get_config("toy"))
    assert toy.model.attention_kernel == "xla" and toy.data.seq_len < DENSE_MAX_T


def test_model_refuses_dense_attention_at_long_t_when_traced():
    cfg = get_model_config("toy", attention_kernel="xla")
    x = jax.ShapeDtypeStruct((1, 8192, cfg.hidden_size), jnp.float32)
    pos = jax.ShapeDtypeStruct((1, 8192), jnp.int32)
    with pytest.raises(ValueError, match=r"'xla'.*T = 8192"):
        jax.eval_shape(lambda a, p: MLAttention(cfg).init(jax.random.key(0), a, p), x, pos)
    ok = get_model_config("toy", attention_kernel="xla_chunked")
    shapes = jax.eval_shape(lambda a, p: MLAttention(ok).init_with_output(jax.random.key(0), a, p)[0], x, pos)
    assert shapes.shape == (1, 8192, cfg.hidden_size)


@pytest.mark.parametrize("preset", plans.REAL_PRESETS)
@pytest.mark.parametrize("stage", sorted(STAGE_FILES))
def test_every_real_stage_config_ships_its_plan(preset, stage):
    run = stage_config(STAGE_FILES[stage].get_config(preset))
    plan = plans.plan_for(preset, stage)
    assert run.model.attention_kernel == plan.attention_kernel in MEMORY_SAFE_KERNELS
    assert (run.model.remat_policy, run.model.moe_impl, run.model.moe_capacity_factor) == \
        (plan.remat_policy, "capacity", plan.capacity_factor)
    assert {a: getattr(run.mesh, a) for a in plan.mesh_dict()} == plan.mesh_dict()
    assert run.chip == plan.chip and run.data.seq_len == plan.seq_len
    assert run.data.batch_size == plan.batch * run.step.grad_accum


@pytest.mark.parametrize("preset", plans.REAL_PRESETS)
def test_every_real_rl_config_ships_its_plan(preset):
    run = orchestrator.rl_config(rl.get_config(preset))
    plan = plans.plan_for(preset, "rl")
    assert run.model.attention_kernel == plan.attention_kernel in MEMORY_SAFE_KERNELS
    assert (run.trainer.rows, run.trainer.seq_len, run.trainer.devices) == (plan.batch, plan.seq_len, plan.chips)
    assert {a: getattr(run.trainer.mesh, a) for a in plan.mesh_dict()} == plan.mesh_dict()


def _dry_run(*args, timeout=1500) -> dict:
    """Run an experiment's --dry_run in a fresh process; the one JSON line it prints."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    proc = subprocess.run([sys.executable, *args, "--dry_run"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    assert len(lines) == 1, proc.stdout[-3000:]
    return json.loads(lines[0])


@pytest.mark.slow  # one gpu_small compile plus the planner's two unrolled cost compiles: minutes on 2 cores
def test_dry_run_gpu_small_cpt_bulk_fits_one_h200():
    out = _dry_run("-m", "experiments.cpt_bulk", "--config=experiments/cpt_bulk.py:gpu_small",
                   "--dry_run_chip=h200", "--dry_run_chips=1")
    assert (out["chip"], out["chips"], out["depth"]) == ("h200", 1, "full")
    assert out["attention_kernel"] == "xla_causal_skip" and out["grad_accum"] == 8
    assert 0 < out["peak_bytes_per_device"] <= out["hbm_bytes"] == 141e9 and out["fits"] is True
    assert out["step_calibrated_s"] > 0 and 0 < out["mfu_calibrated"] < 1 and out["tokens_per_s_calibrated"] > 0


@pytest.mark.slow  # one gpu_small compile plus the cost compiles
def test_dry_run_reports_an_unfitting_config_with_its_numbers():
    # gpu_small's fp32 parameters (≈ 27 GB), Muon's momentum and the accumulated gradients (≈ 27 GB each) do not
    # fit a 32 GB v6e, even after the ÷ 2 calibration; an override in the flags (grad_accum 4) is compiled as given
    out = _dry_run("-m", "experiments.cpt_bulk", "--config=experiments/cpt_bulk.py:gpu_small",
                   "--config.step.grad_accum=4", "--dry_run_chip=v6e", "--dry_run_chips=1")
    assert out["fits"] is False and out["fits_calibrated"] is False
    assert out["peak_bytes_per_device"] > 2 * out["hbm_bytes"] == 64e9
    assert out["grad_accum"] == 4 and out["depth"] == "full" and out["batch"] == 8
    assert out["step_calibrated_s"] > 0 and out["mfu_calibrated"] > 0


@pytest.mark.slow  # the toy on 2 simulated devices: the re-exec with XLA_FLAGS and the mesh product as the count
def test_dry_run_toy_on_two_simulated_devices_reexecs_with_the_count():
    out = _dry_run("-m", "experiments.sft", "--config.mesh.fsdp=2", "--dry_run_chip=h100")
    assert out["chips"] == 2 and out["mesh"] == {"fsdp": 2} and out["fits"] is True
    assert out["batch"] == 4 and out["seq_len"] == 512 and out["peak_bytes_per_device"] > 0
