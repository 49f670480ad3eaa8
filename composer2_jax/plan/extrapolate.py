"""The per-device peak of a train step at full depth from reduced-depth compiles (`--dry_run_depth=extrapolate`).

A step's peak is the most bytes live at any point of its schedule: what stays resident (arguments and outputs:
parameters, optimizer state, the batch) plus the temporaries live at that point. Two points of the schedule compete:

* the micro-batch loop (forward, backward, the accumulated gradients): its temporaries grow linearly in the scan
  units from two units on (a one-unit program's temporaries can exceed a two-unit one's: docs/scaling.md);
* the optimizer update after it (Muon's Newton–Schulz works on the whole stacked gradients at once): its
  temporaries grow faster per unit, but start lower.

So the step's temporaries are the maximum of two lines, and a line through shallow compiles follows the loop's
while the full depth's peak may sit in the update (docs/scaling.md has the figures). The estimate here keeps both:
the resident bytes and the loop's temporaries extrapolated linearly from compiles of the real step with
`REDUCED_UNITS` scan units (same scan, remat, grad accumulation and optimizer as the full program; the resident part
is exactly linear), and the update's temporaries from a compile of the optimizer update alone at full depth (no
model in it, so it compiles quickly at any depth). The peak is the resident bytes plus the larger temporaries.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from composer2_jax.model.layer_plan import layer_plan
from composer2_jax.plan.step import compile_optimizer_update

REDUCED_UNITS = (2, 3)  # scan units of the two reduced compiles: ≥ 2, where the loop's temporaries are linear


class Memory(NamedTuple):
    """A compiled program's per-device bytes: resident (arguments + outputs − aliased) and temporaries."""

    resident: int
    temp: int

    @classmethod
    def of(cls, mem) -> "Memory":
        """From `compiled.memory_analysis()`."""
        return cls(mem.argument_size_in_bytes + mem.output_size_in_bytes - mem.alias_size_in_bytes,
                   mem.temp_size_in_bytes)


def with_units(cfg, units: int):
    """`cfg` with `units` scan units of its decoder stack (the dense prefix and the suffix kept)."""
    prefix, pattern, _, suffix = layer_plan(cfg)
    return dataclasses.replace(cfg, num_layers=len(prefix) + units * (len(pattern) or 1) + len(suffix))


def update_temp_bytes(cfg, optim_cfg, mesh, shape: tuple[int, int]) -> int:
    """Per-device temporaries of the optimizer update alone (gradients → new parameters and optimizer state, both
    donated) for the model `cfg` on `mesh`: the optimizer phase of the train step."""
    compiled = compile_optimizer_update(cfg, optim_cfg, mesh, shape)
    return compiled.memory_analysis().temp_size_in_bytes


def extrapolated_peak(compile_fn, cfg, optim_cfg, mesh, shape: tuple[int, int]) -> tuple[int, str]:
    """(estimated per-device peak bytes of the full-depth step, how it was obtained); `compile_fn(cfg, mesh)` compiles
    the real step (returns (compiled, abstract state)), `shape` is (batch, seq_len) of the train state."""
    n_units = layer_plan(cfg)[2]
    lo, hi = REDUCED_UNITS
    if n_units <= hi:
        raise ValueError(f"extrapolate needs more than {hi} scan units to extrapolate from; the model has {n_units}: "
                         f"compile it fully (depth 'full')")
    a, b = (Memory.of(compile_fn(with_units(cfg, u), mesh)[0].memory_analysis()) for u in REDUCED_UNITS)
    line = lambda x, y: x + (y - x) * (n_units - lo) // (hi - lo)  # noqa: E731
    resident, loop_temp = line(a.resident, b.resident), line(a.temp, b.temp)
    opt_temp = update_temp_bytes(cfg, optim_cfg, mesh, shape)
    peak = resident + max(loop_temp, opt_temp)
    how = (f"reduced depth, extrapolated: the step compiled with {lo} and {hi} of {n_units} scan units (resident "
           f"{a.resident} and {b.resident}, temporaries {a.temp} and {b.temp} bytes), linear in the units, and the "
           f"optimizer update alone at full depth (temporaries {opt_temp} bytes); peak = resident {resident} + "
           f"max(loop {loop_temp}, update {opt_temp}) (composer2_jax/plan/extrapolate.py)")
    return peak, how
