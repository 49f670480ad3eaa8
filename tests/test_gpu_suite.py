"""The prepared GPU run (benchmarks/perf/gpu_suite.py): bounded stages, riskiest first, ≤ 8 min, and its CPU smoke."""

import json
import os
import subprocess
import sys

import pytest

from benchmarks.perf import gpu_fit, gpu_suite

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_stages_riskiest_first_and_within_eight_minutes():
    assert [s.name for s in gpu_suite.STAGES] == [
        "probe", "block_check", "block_tflops_8k", "block_tflops_32k", "ring_device_program", "moe", "model_step",
        "decode", "train"]
    assert sum(s.timeout_s for s in gpu_suite.STAGES) <= gpu_suite.TOTAL_S <= 8 * 60
    tflops = [s for s in gpu_suite.STAGES if s.name.startswith("block_tflops")]
    assert [s.argv[s.argv.index("--t") + 1] for s in tflops] == ["8192", "32768"]


def test_the_suite_runs_the_compiled_sizes():
    """The train and model-step stages pass exactly the sizes tests/test_gpu_fit.py compiles; same fraction."""
    argv = list(next(s for s in gpu_suite.STAGES if s.name == "train").argv)
    for flag, key in (("--preset", "preset"), ("--seq_len", "seq_len"), ("--batch", "batch"),
                      ("--optimizer", "optimizer")):
        assert argv[argv.index(flag) + 1] == str(gpu_fit.TRAIN_GPU[key])
    assert "--seq" not in next(s for s in gpu_suite.STAGES if s.name == "model_step").argv  # MODEL_STEP_SEQ
    env = gpu_suite.stage_env(False)
    assert env["XLA_PYTHON_CLIENT_MEM_FRACTION"] == str(gpu_fit.MEM_FRACTION)
    assert env["COMPOSER2_STRICT_KERNELS"] == "1"
    assert gpu_suite.stage_env(True)["JAX_PLATFORMS"] == "cpu"


def test_a_failing_and_a_hanging_stage_are_reported_not_fatal():
    fail = gpu_suite.Stage("fail", ("benchmarks.perf.gpu_probe", "--no-such-flag"), 60, smoke_argv=())
    r = gpu_suite.run_stage(fail, smoke=True, timeout_s=120)
    assert r["status"] == "failed" and r["rc"] == 2
    assert any("--no-such-flag" in line for line in r["stderr_tail"])
    hang = gpu_suite.Stage("hang", ("timeit", "-n", "1", "-r", "1", "import time; time.sleep(60)"), 1, smoke_argv=())
    r = gpu_suite.run_stage(hang, smoke=True, timeout_s=2)
    assert r["status"] == "timeout" and r["seconds"] < 30


def test_summary_names_fallbacks_and_failures():
    rec = {"bench": "gpu_block_tflops", "kernel": "cudnn", "t": 8192, "block_fwd_bwd_tflops": 400.0,
           "kernel_paths": {"paths": {"block_fwd": ["cudnn"]}, "fallbacks": {}}}
    results = [dict(stage="block_tflops_8k", status="ok", seconds=12.0, lines=[rec], fallbacks=[], stderr_tail=[]),
               dict(stage="moe", status="failed", seconds=3.0, lines=[], fallbacks=["grouped_matmul: x"],
                    stderr_tail=["KernelFallbackError: grouped_matmul: largest expert group exceeds"])]
    text = gpu_suite.summary(results, 15.0)
    assert text.splitlines()[0] == "GPU suite: 1/2 stages ok in 15 s"
    assert "block_fwd_bwd_tflops=400 paths=block_fwd:cudnn" in text
    assert "FALLBACKS: ['grouped_matmul: x']" in text and "! KernelFallbackError" in text


@pytest.mark.slow
def test_smoke_runs_every_stage_on_cpu(tmp_path):
    """The same stages at toy sizes on CPU: all succeed under strict kernels, every line carries its paths."""
    env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    p = subprocess.run([sys.executable, "-m", "benchmarks.perf.gpu_suite", "--smoke", "--out", str(tmp_path)], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=gpu_suite.SMOKE_TOTAL_S + 120, check=False)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert sorted(os.listdir(tmp_path)) == ["logs.txt", "results.jsonl", "summary.txt"]
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert {r["stage"] for r in lines} == {s.name for s in gpu_suite.STAGES}
    for r in lines:
        assert r["kernel_paths"]["strict"] is True and r["kernel_paths"]["fallbacks"] == {}, r
    summary = (tmp_path / "summary.txt").read_text().splitlines()
    assert summary[0].startswith(f"GPU suite: {len(gpu_suite.STAGES)}/{len(gpu_suite.STAGES)} stages ok")
    assert len(summary) <= 60  # one screen
