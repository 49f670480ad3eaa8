"""One mesh's plan: compile the stage, report per-device memory and the roofline (`plan`); the roofline against
published step times (`validate`)."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Optional

import jax

from composer2_jax import chips
from composer2_jax import sharding as shd
from composer2_jax.model.layer_plan import layer_plan
from composer2_jax.model.pipeline import pipeline_spec
from composer2_jax.plan.calibration import CPU_MEMORY_OVERESTIMATE, REFERENCES
from composer2_jax.plan.hlo import schedule_trip_counts
from composer2_jax.plan.roofline import (
    RooflineStep,
    StepCosts,
    _moe_overlap_report,
    _pipelined_roofline,
    _roofline,
)
from composer2_jax.plan.stage import STAGES, Execution, _stage_config
from composer2_jax.plan.step import _shard_bytes, _unit_costs, compile_train_step, parse_mesh, peak_bytes
from composer2_jax.train.loop import validate_layout


@dataclasses.dataclass(frozen=True)
class PlanOptions:
    """How `plan` compiles and estimates a stage on a mesh (the CLI's flags of the same names)."""

    batch: Optional[int] = None  # global batch in sequences (None: one per data-parallel shard, × M/S pipelined)
    seq_len: Optional[int] = None  # None: the stage's
    optimizer: str = "muon"  # train/optim.py name
    estimate: bool = True  # the roofline too (False: memory and the pipeline schedule only)
    moe_impl: str = "capacity"  # capacity (factor 1.25, bounded buffers) | dropless
    microbatches: int = 0  # pipeline microbatches (0: one per stage)
    repeats: int = 1  # pipeline virtual stages per stage (circular schedule)
    execution: Optional[Execution] = None  # remat policy, expert capacity factor, causal skipping (None: defaults)
    gather_params: bool = False  # model.pipeline_gather_params: a stage's parameters gathered once per step
    moe_overlap_chunks: int = 1  # model.moe_overlap_chunks: MoE tokens in C software-pipelined chunks
    matmul_precision: str = "bf16"  # model.matmul_precision: bf16 | fp8 (FP8 FFN matmuls at the chip's FP8 peak)
    # step.grad_accum of the memory compile: the step takes grad_accum × batch sequences and accumulates gradients
    # over grad_accum micro-batches of `batch`, as the stage that ships the plan does; the roofline stays per
    # micro-batch
    grad_accum: int = 1


def plan(preset: str, stage: str, mesh_shape: dict, chip_name: str, options: PlanOptions = PlanOptions()) -> dict:
    """Compile the stage on the mesh (devices must exist) and return the memory/cost/roofline report.

    `options.execution` (remat policy, expert capacity factor, causal block skipping) overrides the stage's defaults
    (full remat, factor 1.25, the masked chunked kernel); `search_execution` searches them on an unpipelined mesh.

    With a `stage` axis > 1 the scanned stack is pipelined (model/pipeline.py) with `microbatches` (0: one per
    stage) and `repeats` virtual stages per stage; the report gains the schedule and its bubble. `gather_params`
    sets model.pipeline_gather_params (a stage's parameters gathered once per step, not once per iteration).
    `moe_overlap_chunks` sets model.moe_overlap_chunks: the report gains `moe_overlap` (`moe_overlap_hidden`) and
    the roofline `a2a_hidden_s` and `step_overlap_s` = step_s − a2a_hidden_s (the other bounds are unchanged).
    `matmul_precision` sets model.matmul_precision: 'fp8' compiles the FP8 FFNs (model/fp8.py) and the roofline
    costs their matmul FLOPs at the chip's FP8 peak (`roofline.fp8_matmul_flops_per_token`)."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; expected one of {sorted(STAGES)}")
    o = options
    chip = chips.get_chip(chip_name)
    cfg, seq = _stage_config(preset, stage, moe_impl=o.moe_impl)
    cfg = dataclasses.replace(cfg, pipeline_microbatches=o.microbatches, pipeline_repeats=o.repeats,
                              pipeline_gather_params=o.gather_params, moe_overlap_chunks=o.moe_overlap_chunks,
                              matmul_precision=o.matmul_precision)
    if o.matmul_precision == "fp8":
        chips.matmul_peak(chip, "fp8")  # a chip without FP8 is an error before anything compiles
    cfg = _mesh_kernel(cfg, mesh_shape)
    seq = o.seq_len or seq
    if o.execution is not None:
        cfg = o.execution.apply(cfg)
    n = math.prod(mesh_shape.values())
    if n != jax.device_count():
        raise ValueError(f"mesh {mesh_shape} needs {n} devices; this process has {jax.device_count()} "
                         f"(run through the CLI, which simulates exactly the mesh's device count)")
    mesh = shd.make_mesh(mesh_shape)
    stages = mesh_shape.get("stage", 1)
    batch = o.batch or _default_batch(mesh_shape, stage, o.microbatches)
    validate_layout(cfg, mesh, batch, seq, 1)
    shd.validate_model_mesh(cfg, mesh, batch, seq)
    if o.grad_accum < 1:
        raise ValueError(f"grad_accum={o.grad_accum}; expected >= 1 micro-batches per step")
    report, abstract = _memory_report(cfg, mesh, batch, seq, o.optimizer, chip, o.grad_accum)
    report = dict(preset=preset, stage=stage, mesh=mesh_shape, chip=chip.name, chips=n, global_batch=batch,
                  seq_len=seq, tokens_per_step=batch * seq, grad_accum=o.grad_accum, **report)
    if stages > 1:
        spec = pipeline_spec(cfg, mesh, layer_plan(cfg)[2])
        trips = report.pop("schedule_trips")
        if trips and trips != [spec.iterations] * 2:  # [] where XLA unrolled the loops: nothing to compare
            raise RuntimeError(f"the compiled schedule loops run {trips} trips, expected two of {spec.iterations}")
        report["pipeline"] = dict(stages=spec.stages, microbatches=spec.microbatches, repeats=spec.repeats,
                                  units_per_stage=spec.units_per_stage, bubble=spec.bubble, ticks=spec.iterations,
                                  compiled_trips=trips, gather_params=cfg.pipeline_gather_params)
    if not o.estimate:
        return report
    step = RooflineStep(cfg, abstract, chip, n, batch, seq)
    if stages > 1:
        report.update(_pipelined_roofline(step, mesh_shape, spec, o.optimizer))
        overlap = report.pop("_moe_overlap")
        if overlap is not None:
            _add_overlap(report, overlap)
        return report
    _add_unpipelined_roofline(report, step, mesh, o.optimizer)
    return report


def _mesh_kernel(cfg, mesh_shape: dict):
    """`cfg` with the attention kernel the mesh needs: the ring where `context` splits the sequence, the chunked
    XLA kernel in its place where it does not."""
    if mesh_shape.get("context", 1) == 1 and cfg.attention_kernel == "ring":
        cfg = dataclasses.replace(cfg, attention_kernel="xla_chunked")
    if mesh_shape.get("context", 1) > 1 and cfg.attention_kernel != "ring":  # a split sequence needs the ring
        cfg = dataclasses.replace(cfg, attention_kernel="ring")
    return cfg


def _default_batch(mesh_shape: dict, stage: str, microbatches: int) -> int:
    """The global batch when none is given: one sequence per data-parallel shard; pipelined, per shard and
    microbatch, split over `stage`."""
    stages = mesh_shape.get("stage", 1)
    dp = mesh_shape["data"] * mesh_shape["fsdp"] * mesh_shape["expert"]
    m = (microbatches or stages) if stages > 1 else 1
    return dp * STAGES[stage][2] * m * stages // math.gcd(m, stages)


def _memory_report(cfg, mesh, batch: int, seq: int, optimizer: str, chip, grad_accum: int = 1
                   ) -> tuple[dict, object]:
    """(the report's memory fields, the abstract train state) from one full-model compile of the step (grad_accum
    micro-batches of `batch`); on a pipelined mesh also `schedule_trips`, the compiled schedule loops' trip counts
    (plan/hlo.py)."""
    t0 = time.time()
    compiled, abstract = compile_train_step(cfg, mesh, batch, seq, optimizer, grad_accum=grad_accum)
    mem = compiled.memory_analysis()
    trips = schedule_trip_counts(compiled.as_text()) if dict(mesh.shape).get("stage", 1) > 1 else None
    params_b, opt_b = _shard_bytes(abstract.params), _shard_bytes(abstract.opt_state)
    peak = peak_bytes(mem)
    return dict(per_device=dict(params_bytes=params_b, optimizer_bytes=opt_b,
                                argument_bytes=mem.argument_size_in_bytes, output_bytes=mem.output_size_in_bytes,
                                alias_bytes=mem.alias_size_in_bytes, temp_bytes=mem.temp_size_in_bytes,
                                activation_and_temp_bytes=mem.temp_size_in_bytes, peak_bytes=peak),
                hbm_bytes=chip.hbm_bytes, fits=bool(peak <= chip.hbm_bytes),
                fits_calibrated=bool(peak / CPU_MEMORY_OVERESTIMATE <= chip.hbm_bytes),
                compile_s=round(time.time() - t0, 1), **({} if trips is None else dict(schedule_trips=trips))), \
        abstract


def _add_unpipelined_roofline(report: dict, step: RooflineStep, mesh, optimizer: str):
    """The roofline of an unpipelined mesh in `report`: the 1- and 2-unit compiles extrapolated to all units, and
    the MoE overlap for a model with routed experts."""
    cfg, chip, batch, seq = step.cfg, step.chip, step.batch, step.seq
    base, delta, n_units, raw = _unit_costs(cfg, mesh, batch, seq, optimizer, chip.node_size)
    tot = {k: base[k] + (n_units - 1) * delta[k] for k in delta}
    report.update(collectives_per_unit=raw[1]["kinds"], **_roofline(StepCosts.of(tot), step))
    if cfg.n_routed_experts:
        token_split = shd.axis_size(mesh, shd.mesh_axes_of("activation_batch") + shd.mesh_axes_of("activation_length"))
        _add_overlap(report, _moe_overlap_report(cfg, raw[0]["colls"], raw[1]["colls"], n_units,
                                                 batch * seq / token_split, mesh, chip))


def _add_overlap(report: dict, overlap: dict):
    """The MoE overlap's fields in a plan report (`plan`)."""
    report["moe_overlap"] = overlap
    report["roofline"]["a2a_hidden_s"] = overlap["a2a_hidden_s"]
    report["roofline"]["step_overlap_s"] = report["roofline"]["step_s"] - overlap["a2a_hidden_s"]


def validate(references=REFERENCES, optimizer: str = "adamw") -> list[dict]:
    """The roofline against published step times: one row per reference (estimated / measured step time).

    The references are AdamW runs. The roofline (no overlap, XLA:CPU's unfused bytes) should be slower than a
    well-tuned run (ratio > 1) and its lower bound (perfect overlap, fused memory traffic) faster (ratio < 1).
    """
    rows = []
    for ref in references:
        r = plan(ref.preset, "cpt_bulk", parse_mesh(ref.mesh), ref.chip,
                 PlanOptions(batch=ref.global_batch, seq_len=ref.seq_len, optimizer=optimizer))
        roof = r["roofline"]
        rows.append(dict(reference=ref.name, preset=ref.preset, chip=ref.chip, mesh=ref.mesh,
                         measured_step_s=ref.step_s, measured_mfu=ref.mfu, est_step_s=roof["step_s"],
                         est_compute_s=roof["compute_s"], est_memory_s=roof["memory_s"], est_comm_s=roof["comm_s"],
                         est_mfu=r["est_mfu"], ratio_est_over_measured=roof["step_s"] / ref.step_s,
                         est_lower_s=roof["step_lower_s"], ratio_lower_over_measured=roof["step_lower_s"] / ref.step_s,
                         est_peak_gb=round(r["per_device"]["peak_bytes"] / 1e9, 2), fits=r["fits"],
                         source=ref.source))
    return rows
