"""The pipeline schedule search: on one pipelined mesh, the virtual stages per device R (v) and the microbatches M
that give the fastest fitting step (`search_schedule`).

What is compiled. The roofline's costs do not depend on (M, R) (`roofline.pipelined_costs`: one stage's 1- and
2-unit models at B/S, the optimizer's extra), so they are compiled once and every candidate's estimate follows from
its schedule: (M·R + S − 1)·L unit passes, the bubble (S − 1)/(M·R + S − 1) (model/pipeline.py), the stage sends
and the parameter regroup for R > 1. Memory does depend on the schedule (the stage inputs kept per tick, the
regrouped parameters), so the candidates are then compiled whole, fastest estimate first, until `fits_wanted` of
them fit: per-device peak from the compiled step's memory analysis, and the schedule loops' trip counts from its
HLO (plan/hlo.py `schedule_trip_counts`), which must equal the tick count M·R + S − 1 the bubble is computed from.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Optional, Sequence

import jax

from composer2_jax import chips
from composer2_jax import sharding as shd
from composer2_jax.model import Transformer
from composer2_jax.model.layer_plan import layer_plan
from composer2_jax.model.pipeline import pipeline_spec
from composer2_jax.plan.calibration import CPU_MEMORY_OVERESTIMATE
from composer2_jax.plan.hlo import schedule_trip_counts
from composer2_jax.plan.report import _default_batch, _mesh_kernel
from composer2_jax.plan.roofline import RooflineStep, _pipelined_roofline, pipelined_costs
from composer2_jax.plan.stage import Execution, _stage_config
from composer2_jax.plan.step import compile_train_step, peak_bytes
from composer2_jax.train import optim
from composer2_jax.train.loop import validate_layout
from composer2_jax.train.state import abstract_train_state


@dataclasses.dataclass(frozen=True)
class ScheduleSearch:
    """What `search_schedule` plans: one stage config on one pipelined mesh, and the (R, M) values to try."""

    preset: str  # config.py preset name, e.g. kimi_k2_5
    stage: str  # plan/stage.py STAGES key, e.g. cpt_bulk
    mesh: dict  # mesh axis → size, with stage > 1
    chip: str  # chips.py name, e.g. h200
    batch: Optional[int] = None  # global batch (sequences); None: the stage's default at M = S
    seq_len: Optional[int] = None  # None: the stage's
    optimizer: str = "muon"  # train/optim.py name
    repeats: Optional[Sequence[int]] = None  # R values; None: every divisor of the units per stage
    microbatches: Optional[Sequence[int]] = None  # M values; None: every M ≥ S the batch allows
    execution: Optional[Execution] = None  # remat, capacity factor, causal skipping (None: the stage's)
    fits_wanted: int = 1  # memory-compile candidates (fastest first) until this many fit
    calibrated_fit: bool = True  # fit after the planner's CPU memory calibration (docs/scaling.md)


def schedule_candidates(cfg, mesh, batch: int, repeats=None, microbatches=None) -> list[tuple[int, int]]:
    """(R, M) pairs the model and batch allow on `mesh`: R divides the units per stage, M ≥ S and the batch splits
    into M microbatches each divisible over the stage's batch axes (train/loop.py `validate_layout`)."""
    s = dict(mesh.shape)["stage"]
    n_units = layer_plan(cfg)[2]
    inner = shd.axis_size(mesh, shd.mesh_axes_of("activation_batch", shd.within_stage()))
    rs = repeats or [r for r in range(1, n_units // s + 1) if (n_units // s) % r == 0]
    ms = microbatches or [m for m in range(s, batch // inner + 1) if batch % (m * inner) == 0]
    bad = [r for r in rs if n_units % (s * r)]
    if bad:
        raise ValueError(f"pipeline repeats {bad} do not divide the {n_units // s} units per stage (stage={s})")
    return [(r, m) for r in rs for m in ms if m >= s and batch % (m * inner) == 0]


def search_schedule(q: ScheduleSearch) -> dict:
    """The fastest fitting (R, M) on one pipelined mesh (module docstring). Returns dict(best (the fitting
    candidate with the highest calibrated tokens/s, its full roofline report under `report`), candidates (every
    (R, M): bubble, ticks, calibrated step / MFU / tokens/s, and where memory-compiled: peak, fits, the compiled
    schedule loops' trip counts), search (compile counts and seconds))."""
    t0 = time.time()
    if q.mesh.get("stage", 1) < 2:
        raise ValueError(f"search_schedule plans a pipelined mesh (stage > 1), got {q.mesh}")
    chip = chips.get_chip(q.chip)
    cfg, seq = _stage_config(q.preset, q.stage)
    cfg = _mesh_kernel(q.execution.apply(cfg) if q.execution else cfg, q.mesh)
    seq = q.seq_len or seq
    n = math.prod(q.mesh.values())
    if n != jax.device_count():
        raise ValueError(f"mesh {q.mesh} needs {n} devices; this process has {jax.device_count()}")
    mesh = shd.make_mesh(q.mesh)
    batch = q.batch or _default_batch(q.mesh, q.stage, 0)
    pairs = schedule_candidates(cfg, mesh, batch, q.repeats, q.microbatches)
    if not pairs:
        raise ValueError(f"no (repeats, microbatches) in {q.repeats} × {q.microbatches} fits batch {batch} on {q.mesh}")
    abstract = _abstract_state(cfg, mesh, batch, seq, q.optimizer)
    costs = pipelined_costs(cfg, q.mesh, chip, batch, seq, q.optimizer)
    t_costs = time.time() - t0
    rows = []
    for r, m in pairs:
        c = dataclasses.replace(cfg, pipeline_repeats=r, pipeline_microbatches=m)
        spec = pipeline_spec(c, mesh, layer_plan(c)[2])
        rep = _pipelined_roofline(RooflineStep(c, abstract, chip, n, batch, seq), q.mesh, spec, q.optimizer,
                                  costs=costs)
        rep.pop("_moe_overlap", None)
        rows.append(dict(repeats=r, microbatches=m, units_per_stage=spec.units_per_stage, ticks=spec.iterations,
                         bubble=spec.bubble, est_mfu_calibrated=rep["est_mfu_calibrated"],
                         tokens_per_s_calibrated=rep["tokens_per_s_calibrated"],
                         step_calibrated_s=rep["roofline"]["step_calibrated_s"],
                         executed_over_useful_flops=rep["executed_over_useful_flops"],
                         bubble_flops=rep["pipeline_costs"]["bubble_flops"],
                         stack_flops_useful=rep["pipeline_costs"]["stack_flops_useful"],
                         param_regroup_bytes=rep["pipeline_costs"]["param_regroup_bytes"], report=rep))
    rows.sort(key=lambda row: -row["tokens_per_s_calibrated"])
    fitting, compiles = _memory_compile_until_fit(rows, cfg, mesh, batch, seq, q, chip)
    best = fitting[0] if fitting else None
    return dict(preset=q.preset, stage=q.stage, mesh=q.mesh, chip=chip.name, chips=n, global_batch=batch,
                seq_len=seq, optimizer=q.optimizer, execution=dataclasses.asdict(q.execution) if q.execution else None,
                best=best, candidates=[{k: v for k, v in r.items() if k != "report"} for r in rows],
                reason=None if best else f"no compiled candidate fits {chip.name} HBM",
                search=dict(memory_compiles=compiles, cost_s=round(t_costs, 1), total_s=round(time.time() - t0, 1)))


def _abstract_state(cfg, mesh, batch: int, seq: int, optimizer: str):
    """The abstract train state (parameter counts, shard bytes) without compiling the step."""
    oc = optim.OptimConfig(name=optimizer)
    make_tx = lambda p, k: optim.make_optimizer(oc, p, k, mesh)  # noqa: E731
    abstract, _, _ = abstract_train_state(Transformer(cfg, mesh), make_tx, mesh, (batch, seq))
    return abstract


def _memory_compile_until_fit(rows, cfg, mesh, batch: int, seq: int, q: ScheduleSearch, chip):
    """Compile the candidates whole, in `rows`' order, until `q.fits_wanted` fit; each compiled row gains its peak,
    fit and the compiled schedule loops' trip counts (which must be the tick count). Returns (fitting, compiles)."""
    fitting, compiles = [], 0
    for row in rows:
        c = dataclasses.replace(cfg, pipeline_repeats=row["repeats"], pipeline_microbatches=row["microbatches"])
        validate_layout(c, mesh, batch, seq, 1)
        compiled, _ = compile_train_step(c, mesh, batch, seq, q.optimizer)
        compiles += 1
        peak = peak_bytes(compiled.memory_analysis())
        trips = schedule_trip_counts(compiled.as_text())
        if trips and trips != [row["ticks"]] * 2:  # [] where XLA unrolled the loops: nothing to compare
            raise RuntimeError(f"the compiled schedule loops run {trips} trips, expected two of {row['ticks']} "
                               f"(R={row['repeats']}, M={row['microbatches']})")
        row.update(peak_bytes=peak, fits=bool(peak <= chip.hbm_bytes),
                   fits_calibrated=bool(peak / CPU_MEMORY_OVERESTIMATE <= chip.hbm_bytes), compiled_trips=trips,
                   compiled_bubble=(dict(mesh.shape)["stage"] - 1) / trips[0] if trips else None)
        if row["fits_calibrated" if q.calibrated_fit else "fits"]:
            fitting.append(row)
            if len(fitting) >= q.fits_wanted:
                break
    return fitting, compiles
