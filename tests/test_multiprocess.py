"""Two JAX processes on CPU (a real coordinator, gloo collectives) train with the same losses as one process
with the same global batch."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.tolerances import SHARDED_FP32

REPO = Path(__file__).resolve().parents[1]
ARGS = ["--config.steps=4", "--config.data.batch_size=8", "--config.data.seq_len=32", "--config.log.every=1",
        "--config.log.progress=False", "--config.checkpoint.every=2", "--config.optim.warmup_steps=1",
        "--config.data_shard_by=rows", "--config.mesh.fsdp=4"]


def _losses(workdir):
    recs = [json.loads(x) for x in (Path(workdir) / "logs" / "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in recs if "loss" in r]


@pytest.mark.slow
def test_two_processes_match_one_process(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    one, two = tmp_path / "one", tmp_path / "two"
    for workdir, procs, devs in ((one, 1, 4), (two, 2, 2)):
        cmd = [sys.executable, "-m", "launch.local", "--processes", str(procs), "--devices_per_process", str(devs),
               "experiments.cpt_bulk", f"--config.workdir={workdir}", *ARGS]
        out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    a, b = _losses(one), _losses(two)
    assert len(a) == len(b) == 4
    np.testing.assert_allclose(a, b, **SHARDED_FP32)
    assert sorted(p.name for p in (two / "checkpoints").iterdir() if p.name.isdigit()) == ["2", "4"]
