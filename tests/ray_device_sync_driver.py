"""The Ray backend with rl.ray.weight_sync='device' (run by tests/test_rl_device_sync.py as process 0 of a
two-process jax.distributed job: C2J_COORDINATOR, C2J_NUM_PROCESSES=2, C2J_PROCESS_ID=0; the RolloutActor is
process 1). Writes the run's counters and history to OUT/result.json."""

import json
import sys
import tempfile
from pathlib import Path

import ray

from composer2_jax.rl import orchestrator
from tests.test_rl_ray import micro_config

if __name__ == "__main__":
    out = Path(sys.argv[1])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    c = micro_config(Path(tempfile.mkdtemp(dir=out)))
    c.rl.update(steps=2)
    c.rl.ray.update(weight_sync="device", rollout_host_devices=4)
    r = orchestrator.run_rl(c)
    import jax

    (out / "result.json").write_text(json.dumps({
        "final_version": r.final_version, "counters": r.counters, "process_count": jax.process_count(),
        "staleness_max": [m["staleness_max"] for m in r.history],
        "episodes": [m["batch/episodes"] for m in r.history]}))
    ray.shutdown()
