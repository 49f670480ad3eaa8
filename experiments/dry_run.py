"""`--dry_run` for every experiment: compile the config exactly as given (flags and overrides included) on simulated
devices of a named chip and count, print one JSON line (composer2_jax/plan/dry_run.py) and exit; nothing trains.

    python -m experiments.cpt_bulk --config=experiments/cpt_bulk.py:kimi_k2_5 --dry_run
    python -m experiments.cpt_bulk --config=experiments/cpt_bulk.py:gpu_small --dry_run --dry_run_chip=h200 \
        --dry_run_chips=1 [--dry_run_depth=extrapolate] [--config.optim.lr=...]

Flags (plain absl flags next to `--config`, so the ConfigDict and its `--config.key=value` overrides are untouched):
  --dry_run            compile instead of train
  --dry_run_chip       accelerator to check against (composer2_jax/chips.py); default: the config's `chip`
  --dry_run_chips      simulated device count; default: the product of the config's mesh sizes (no -1 axis)
  --dry_run_depth      full (default) | extrapolate: 2- and 3-unit compiles extrapolated to the whole stack
The simulated devices must exist before jax starts: when XLA_FLAGS does not already ask for that many host devices
the process re-executes itself once with XLA_FLAGS=--xla_force_host_platform_device_count=N and JAX_PLATFORMS=cpu.
"""

from __future__ import annotations

import json
import math
import os
import sys

from absl import flags

DEPTHS = ("full", "extrapolate")  # composer2_jax/plan/dry_run.py DEPTHS (not imported here: it imports jax)

_REEXEC = "COMPOSER2_DRY_RUN_REEXEC"


def define_flags():
    """Register the four --dry_run flags (once per process)."""
    if "dry_run" in flags.FLAGS:
        return
    flags.DEFINE_bool("dry_run", False, "compile the config on simulated devices, print one JSON line, exit")
    flags.DEFINE_string("dry_run_chip", "", "chip of the dry run (composer2_jax/chips.py); default: config.chip")
    flags.DEFINE_integer("dry_run_chips", 0, "simulated device count; default: the config mesh's product")
    flags.DEFINE_enum("dry_run_depth", "full", list(DEPTHS), "full compile, or 2-/3-unit compiles extrapolated")


def target(chip: str, mesh) -> tuple[str, int]:
    """(chip, device count) of the dry run: the flags, else `chip` (the config's or its plan's) and the mesh's
    product."""
    f = flags.FLAGS
    name = f.dry_run_chip or chip
    if not name:
        raise SystemExit("config error: --dry_run needs a chip: --dry_run_chip=h200 (or the config's chip)")
    n = f.dry_run_chips
    sizes = [int(mesh[a]) for a in ("stage", "data", "fsdp", "expert", "tensor", "context")]
    if not n:
        if -1 in sizes:
            raise SystemExit(f"config error: the mesh {dict(mesh)} has a -1 axis; give --dry_run_chips=N")
        n = math.prod(sizes)
    return name, n


def ensure_devices(n: int):
    """Re-execute this process with n simulated host CPU devices unless it already has them."""
    want = f"--xla_force_host_platform_device_count={n}"
    if want in os.environ.get("XLA_FLAGS", "").split() and os.environ.get("JAX_PLATFORMS") == "cpu":
        return
    if os.environ.get(_REEXEC):
        raise SystemExit(f"dry run: re-executed with {want} but XLA_FLAGS is {os.environ.get('XLA_FLAGS')!r}")
    flags_ = " ".join(x for x in os.environ.get("XLA_FLAGS", "").split()
                      if not x.startswith("--xla_force_host_platform_device_count"))
    env = dict(os.environ, XLA_FLAGS=f"{flags_} {want}".strip(), JAX_PLATFORMS="cpu", **{_REEXEC: "1"})
    main = sys.modules["__main__"]
    spec = getattr(main, "__spec__", None)
    cmd = [sys.executable, "-m", spec.name] if spec is not None else [sys.executable, sys.argv[0]]
    sys.stdout.flush()
    os.execve(sys.executable, cmd + sys.argv[1:], env)


def run(config, shape_of, chip: str, mesh) -> dict:
    """The dry run of `config` (a ConfigDict; `shape_of` turns it into a `plan/dry_run.StepShape`) on `chip` and
    `mesh` unless the flags name others: devices (re-executing if needed), compile, print one JSON line."""
    from composer2_jax.plan import dry_run as dr

    chip, n = target(chip, mesh)
    ensure_devices(n)
    out = dr.dry_run(shape_of(config), chip, n, flags.FLAGS.dry_run_depth)
    print(json.dumps(out), flush=True)
    return out
