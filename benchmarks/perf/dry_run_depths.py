"""Per-device memory of a stage's train step compiled at several depths, JSON lines: how the peak grows in the scan
units, split into resident bytes (arguments + outputs − aliased) and temporaries, plus the temporaries of the
optimizer update alone (what `--dry_run_depth=extrapolate` combines: composer2_jax/plan/extrapolate.py).

    python -m benchmarks.perf.dry_run_depths --config=experiments/cpt_bulk.py:gpu_small --units=1,2,3,4,11 \
        [--update_units=1,2,4,11]

`--devices N` simulated host devices (default 1: gpu_small's mesh; 256 for the kimi_k2_5 plans' meshes); compiles run
one after another.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="FILE:PRESET of an experiment's stage config")
    ap.add_argument("--units", default="2,3", help="scan units of the step compiles, comma-separated")
    ap.add_argument("--update_units", default="", help="scan units of the optimizer-update-alone compiles")
    ap.add_argument("--devices", type=int, default=1, help="simulated host devices: the product of the config's mesh")
    a = ap.parse_args()
    os.environ["JAX_PLATFORMS"] = "cpu"
    os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={a.devices}"
    from composer2_jax import sharding as shd
    from composer2_jax.plan.dry_run import stage_shape
    from composer2_jax.plan.extrapolate import Memory, update_temp_bytes, with_units
    from composer2_jax.train.loop import stage_config
    from experiments.main import load_config

    sh = stage_shape(stage_config(load_config(a.config)))
    mesh = shd.make_mesh(sh.mesh)
    for kind, units in (("step", a.units), ("update", a.update_units)):
        for u in (int(x) for x in filter(None, units.split(","))):
            t, cfg = time.time(), with_units(sh.model, u)
            if kind == "step":
                m = Memory.of(sh.compile(cfg, mesh)[0].memory_analysis())
                row = dict(resident=m.resident, temp=m.temp, peak=sum(m))
            else:
                row = dict(temp=update_temp_bytes(cfg, sh.optim, mesh, (sh.batch, sh.seq_len)))
            print(json.dumps(dict(config=a.config, compiled=kind, units=u, **row, wall_s=round(time.time() - t, 1))),
                  flush=True)


if __name__ == "__main__":
    main()
