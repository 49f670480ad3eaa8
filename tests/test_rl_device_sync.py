"""Weight sync between two processes of one jax.distributed job, device to device: a ppermute over a role × shard
mesh spanning the trainer process's 4 CPU devices and the rollout process's 4 (gloo). After each publication the
rollout process's engine holds the trainer's parameters bit for bit; a version published mid-reply is sampled from
the next decode step on, one published between turns from the next turn. Outside one job: a clear error."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # 31–165 s on 2 shared cores: two JAX processes each compile a trainer or an engine
def test_two_processes_sync_weights_device_to_device(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    cmd = [sys.executable, "-m", "launch.local", "--processes", "2", "--devices_per_process", "4",
           "tests.two_process_weight_sync", str(tmp_path)]
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    record = json.loads((tmp_path / "rollout.json").read_text())
    first, second = record["versions"]
    assert first == [0] * 5 + [1] * 15  # version 1 landed after the 5th token of the reply in flight
    assert second == [2] * 6  # version 2, published between the episode's turns
    assert record["engine_version"] == 2 and record["received"] == 3 and len(record["sync_s"]) == 2
    for version in (0, 1, 2):
        want, got = np.load(tmp_path / f"trainer_{version}.npz"), np.load(tmp_path / f"engine_{version}.npz")
        assert sorted(want.files) == sorted(got.files) and want.files
        for key in want.files:
            np.testing.assert_array_equal(got[key], want[key], err_msg=f"version {version} {key}")
    changed = [k for k in want.files if not np.array_equal(np.load(tmp_path / "trainer_0.npz")[k], want[k])]
    assert changed  # the versions differ, so equality above is not trivially the initial weights


def test_device_sync_outside_one_distributed_job_is_an_error():
    from composer2_jax.rl.services.device_sync import DeviceWeightReceiver, DeviceWeightSender

    for side in (DeviceWeightSender, DeviceWeightReceiver):
        with pytest.raises(ValueError, match=r"one jax.distributed job .* jax.process_count\(\)=1"):
            side()


def test_the_weight_sync_choice_is_validated_and_a_driver_outside_a_job_is_named(monkeypatch):
    pytest.importorskip("ray")
    from composer2_jax.rl import orchestrator
    from composer2_jax.rl.run_config import RayConfig
    from composer2_jax.rl.services.ray_loop import join_device_sync_job
    from tests.test_rl_ray import micro_config

    with pytest.raises(ValueError, match=r"rl.ray.weight_sync='nccl'; expected one of \('object_store', 'device'\)"):
        RayConfig(weight_sync="nccl")
    with pytest.raises(ValueError, match="weight_deltas applies to weight_sync='object_store'"):
        RayConfig(weight_sync="device", weight_deltas=True)
    c = micro_config(Path("/tmp/unused"))
    c.rl.ray.weight_sync = "device"
    run = orchestrator.rl_config(c)
    monkeypatch.delenv("C2J_COORDINATOR", raising=False)
    with pytest.raises(ValueError, match=r"driver started as process 0 of a jax.distributed job of "
                                         r"rl.ray.rollout_actors \+ 1 = 2 processes .* this driver has "
                                         r"\{'C2J_COORDINATOR': None"):
        join_device_sync_job(run, 0, 0)


@pytest.mark.slow  # ~5 min on 2 shared cores: Ray, sandboxes, two JAX processes
def test_the_ray_backend_syncs_weights_device_to_device_in_one_job(tmp_path):
    """rl.ray.weight_sync='device': the driver is process 0 of a two-process job, the RolloutActor process 1; the run
    trains 2 versions, every publication (versions 0, 1, 2) goes through the collective, and the processes leave the
    job together."""
    from launch.local import free_port

    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.update(C2J_COORDINATOR=f"127.0.0.1:{free_port()}", C2J_NUM_PROCESSES="2", C2J_PROCESS_ID="0",
               JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=4")
    out = subprocess.run([sys.executable, "-m", "tests.ray_device_sync_driver", str(tmp_path)], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    r = json.loads((tmp_path / "result.json").read_text())
    assert r["final_version"] == 2 and r["process_count"] == 2
    assert r["counters"]["weight_syncs_device"] == 3 and "weight_bytes_sent" not in r["counters"]
    assert all(s <= 1 for s in r["staleness_max"]) and sum(r["episodes"]) >= 2 * 2 * 2
