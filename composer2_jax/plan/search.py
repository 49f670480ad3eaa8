"""Searches: the fastest fitting mesh of n chips (`search`), and the fastest way to execute a stage on one mesh
(`search_execution`: remat policy × expert capacity factor × causal block skipping)."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Optional, Sequence

import jax

from composer2_jax import chips
from composer2_jax import sharding as shd
from composer2_jax.model.layer_plan import layer_plan
from composer2_jax.plan.calibration import CPU_MEMORY_OVERESTIMATE
from composer2_jax.plan.report import PlanOptions, plan
from composer2_jax.plan.roofline import RooflineStep, StepCosts, _roofline
from composer2_jax.plan.stage import EXECUTION_CAPACITIES, EXECUTION_REMATS, STAGES, Execution, _stage_config
from composer2_jax.plan.step import _unit_costs, compile_train_step, peak_bytes
from composer2_jax.train.loop import validate_layout


def factorizations(n: int, cfg, seq: int, context_options=(1,), stage_options=(1,)) -> list[dict]:
    """Meshes of n devices that the model's dimensions allow (experts by expert, heads by tensor, pipeline stages
    by the scanned stack's units, ...)."""
    n_units = layer_plan(cfg)[2]
    out = []
    for stage in stage_options:
        if n % stage or (stage > 1 and (not n_units or n_units % stage)):
            continue
        per_stage = n // stage
        for expert in _divisors(per_stage):
            if cfg.n_routed_experts and cfg.n_routed_experts % expert:
                continue
            for tensor in _divisors(per_stage // expert):
                if cfg.num_heads % tensor or tensor > 8:
                    continue
                for context in context_options:
                    rest = per_stage // (expert * tensor)
                    if rest % context or seq % (2 * context):
                        continue
                    out.append(dict(stage=stage, data=1, fsdp=rest // context, expert=expert, tensor=tensor,
                                    context=context))
    return out


def _divisors(n: int) -> list[int]:
    """The divisors of n, ascending."""
    return [d for d in range(1, n + 1) if n % d == 0]


def search(preset: str, stage: str, n: int, chip_name: str, optimizer: str = "muon", limit: int = 6,
           seq_len: Optional[int] = None, stages=(1,)) -> dict:
    """Fastest fitting mesh of n chips among the allowed factorizations: up to `limit` meshes that fit (memory
    from the compile, most expert parallelism and least tensor parallelism first), then ranked by the roofline's
    calibrated tokens/s (meshes with a context axis train fewer sequences per step, so step time would mislead).
    `stages`: the pipeline sizes to include (mesh axis `stage`; each must divide n and the scanned units)."""
    cfg, seq = _stage_config(preset, stage)
    seq = seq_len or seq
    ctx = (1, 2, 4, 8, 16) if stage == "cpt_long" else (1, 2, 4, 8)
    cands = factorizations(n, cfg, seq, ctx, stages)
    # favour EP, little TP (MoE practice); pipelined meshes after the unpipelined ones of the same shape
    cands.sort(key=lambda m: (m["tensor"], -m["expert"], m["context"], m["stage"]))
    tried = []
    for m in cands[: limit * 3]:
        r = plan(preset, stage, m, chip_name, PlanOptions(seq_len=seq, optimizer=optimizer, estimate=False))
        tried.append(dict(mesh=m, fits=r["fits"], peak_gb=round(r["per_device"]["peak_bytes"] / 1e9, 1)))
        if len([t for t in tried if t["fits"]]) >= limit:
            break
    fitting = [t for t in tried if t["fits"]]
    if not fitting:
        return dict(best=None, tried=tried, reason=f"no tried mesh of {n} chips fits {chip_name} HBM")
    ranked = [plan(preset, stage, t["mesh"], chip_name, PlanOptions(seq_len=seq, optimizer=optimizer))
              for t in fitting]
    ranked.sort(key=lambda r: -r["tokens_per_s_calibrated"])
    summary = [dict(mesh=r["mesh"], tokens_per_s=round(r["tokens_per_s_calibrated"]),
                    step_s=round(r["roofline"]["step_calibrated_s"], 3), est_mfu=round(r["est_mfu_calibrated"], 4),
                    peak_gb=round(r["per_device"]["peak_bytes"] / 1e9, 1)) for r in ranked]
    return dict(best=ranked[0], ranked=summary, tried=tried)


@dataclasses.dataclass(frozen=True)
class ExecutionSearch:
    """What `search_execution` plans: one stage config on one unpipelined mesh, and the execution values to try."""

    preset: str  # config.py preset name, e.g. kimi_k2_5
    stage: str  # plan/stage.py STAGES key, e.g. cpt_bulk
    mesh: dict  # mesh axis → size, without stage or context axes > 1
    chip: str  # chips.py name, e.g. h200
    batch: Optional[int] = None  # global batch (sequences); None: one per data-parallel shard
    seq_len: Optional[int] = None  # None: the stage's
    optimizer: str = "muon"  # train/optim.py name
    remats: Sequence[str] = EXECUTION_REMATS  # remat policies to try
    capacities: Sequence[float] = EXECUTION_CAPACITIES  # expert capacity factors to try
    skips: Sequence[bool] = (False, True)  # causal block skipping values to try
    calibrated_fit: bool = True  # fit after the planner's CPU memory calibration (docs/scaling.md)


def search_execution(q: ExecutionSearch) -> dict:
    """The fastest way to execute a stage on one (unpipelined) mesh: remat policy × expert capacity factor ×
    causal block skipping, each candidate with executed / useful FLOPs, calibrated step and MFU, and peak memory.

    What is compiled (the invariants are shared, so a candidate costs no fresh full-model compile):
      memory   one full-model compile per remat policy at the largest capacity factor (expert buffers grow with
               it, so smaller factors need at most that) with the first `skips` value, plus one at the first remat
               policy with the other skip value when both are searched: its difference (attention temporaries,
               transient within a layer) is added to the other policies' peaks;
      costs    the unrolled 1- and 2-unit compiles (`_unit_costs`) per (remat policy, capacity factor) with the
               first `skips` value, and per remat policy once more with the other at the largest factor: the
               skipping's difference there is added at the other factors (skipping touches only the attention
               kernel, the capacity factor only the MoE, so their effects add; tests/test_plan.py checks the sum
               against the unrolled compiles of a skipping model at another factor).
    A candidate fits when its peak is within HBM after the planner's CPU calibration (`q.calibrated_fit`, the
    convention of docs/scaling.md: every kimi_k2_5 plan is over HBM as compiled on CPU) or as compiled (False).
    """
    t_start = time.time()
    mesh_shape = q.mesh
    if mesh_shape.get("stage", 1) > 1 or mesh_shape.get("context", 1) > 1:
        raise ValueError(f"search_execution plans unpipelined meshes without a context axis, got {mesh_shape}; "
                         "plan a pipelined or context-parallel mesh with plan()")
    chip = chips.get_chip(q.chip)
    base_cfg, seq = _stage_config(q.preset, q.stage)
    if base_cfg.attention_kernel == "ring":
        base_cfg = dataclasses.replace(base_cfg, attention_kernel="xla_chunked")
    seq = q.seq_len or seq
    n = math.prod(mesh_shape.values())
    if n != jax.device_count():
        raise ValueError(f"mesh {mesh_shape} needs {n} devices; this process has {jax.device_count()}")
    mesh = shd.make_mesh(mesh_shape)
    batch = q.batch or mesh_shape["data"] * mesh_shape["fsdp"] * mesh_shape["expert"] * STAGES[q.stage][2]
    validate_layout(base_cfg, mesh, batch, seq, 1)
    shd.validate_model_mesh(base_cfg, mesh, batch, seq)
    remats, capacities, skips = tuple(q.remats), tuple(q.capacities), tuple(q.skips)
    compiles = _Compiles(base_cfg, mesh, batch, seq, q.optimizer, chip.node_size)
    peak, abstract = _search_peaks(compiles, remats, max(capacities), skips)
    t_memory = time.time() - t_start
    units, skip_delta = _search_unit_costs(compiles, remats, capacities, skips)
    base = RooflineStep(base_cfg, abstract, chip, n, batch, seq)
    rows = []
    for r in remats:
        for cap in capacities:
            for skip in skips:
                tot = {k: units[(r, cap)][k] + skip_delta[(r, skip)][k] for k in _COST_KEYS}
                rows.append(_candidate_row(Execution(r, cap, skip), base, tot, peak[(r, skip)]))
    # fastest first; among equally fast ones (a communication-bound step) the one executing fewer FLOPs
    rows.sort(key=lambda row: (-row["tokens_per_s_calibrated"], row["executed_over_useful_flops"]))
    fit_key = "fits_calibrated" if q.calibrated_fit else "fits"
    fitting = [row for row in rows if row[fit_key]]
    timings = dict(memory_compiles=compiles.memory_compiles, cost_compiles=compiles.cost_compiles,
                   memory_s=round(t_memory, 1), total_s=round(time.time() - t_start, 1))
    return dict(preset=q.preset, stage=q.stage, mesh=mesh_shape, chip=chip.name, chips=n, global_batch=batch,
                seq_len=seq, optimizer=q.optimizer, fit=fit_key,
                best=fitting[0] if fitting else None, candidates=rows, search=timings,
                reason=None if fitting else f"no candidate fits {chip.name} HBM ({fit_key})")


_COST_KEYS = ("flops", "bytes", "ici", "dcn")


@dataclasses.dataclass
class _Compiles:
    """The compiles `search_execution` runs for its candidates (one stage config on one mesh), counted."""

    base_cfg: object
    mesh: object
    batch: int
    seq: int
    optimizer: str
    node_size: int
    memory_compiles: int = 0
    cost_compiles: int = 0

    def peak_of(self, ex: Execution):
        """(peak bytes, abstract train state) of the full model executing as `ex`."""
        compiled, abstract = compile_train_step(ex.apply(self.base_cfg), self.mesh, self.batch, self.seq,
                                                self.optimizer)
        self.memory_compiles += 1
        return peak_bytes(compiled.memory_analysis()), abstract

    def unit_totals(self, ex: Execution):
        """(a step's per-device cost totals, one unit's collectives by kind) from the 1- and 2-unit compiles."""
        base, delta, n_units, raw = _unit_costs(ex.apply(self.base_cfg), self.mesh, self.batch, self.seq,
                                                self.optimizer, self.node_size)
        self.cost_compiles += 2
        return {k: base[k] + (n_units - 1) * delta[k] for k in _COST_KEYS}, raw[1]["kinds"]


def _search_peaks(compiles: _Compiles, remats, cap_max: float, skips) -> tuple[dict, object]:
    """Peak bytes per (remat policy, skip) at the largest capacity factor (`search_execution`'s docstring), and
    the abstract train state."""
    peak, abstract = {}, None
    for r in remats:
        peak[(r, skips[0])], abstract = compiles.peak_of(Execution(r, cap_max, skips[0]))
    if len(set(skips)) > 1:
        other = skips[1]
        peak[(remats[0], other)], _ = compiles.peak_of(Execution(remats[0], cap_max, other))
        for r in remats[1:]:
            peak[(r, other)] = peak[(r, skips[0])] + peak[(remats[0], other)] - peak[(remats[0], skips[0])]
    return peak, abstract


def _search_unit_costs(compiles: _Compiles, remats, capacities, skips) -> tuple[dict, dict]:
    """(cost totals per (remat policy, capacity factor) with the first skip value, the skipping's difference per
    (remat policy, skip value) measured at the largest factor): `search_execution`'s docstring."""
    cap_max = max(capacities)
    units, skip_delta = {}, {}
    for r in remats:
        for cap in capacities:
            units[(r, cap)], _ = compiles.unit_totals(Execution(r, cap, skips[0]))
        skip_delta[(r, skips[0])] = dict.fromkeys(_COST_KEYS, 0.0)
        for other in set(skips) - {skips[0]}:
            flipped, _ = compiles.unit_totals(Execution(r, cap_max, other))
            skip_delta[(r, other)] = {k: flipped[k] - units[(r, cap_max)][k] for k in _COST_KEYS}
    return units, skip_delta


def _candidate_row(ex: Execution, base: RooflineStep, tot: dict, pk: int) -> dict:
    """One candidate of the execution search: its roofline (the step `base` executing as `ex`) from the cost totals
    `tot`, and its peak bytes `pk`."""
    chip, n = base.chip, base.n
    rep = _roofline(StepCosts.of(tot), dataclasses.replace(base, cfg=ex.apply(base.cfg)))
    rf = rep["roofline"]
    return dict(
        execution=dataclasses.asdict(ex), executed_over_useful_flops=rep["executed_over_useful_flops"],
        step_calibrated_s=rf["step_calibrated_s"], est_mfu_calibrated=rep["est_mfu_calibrated"],
        tokens_per_s_calibrated=rep["tokens_per_s_calibrated"], peak_bytes=pk,
        fits=bool(pk <= chip.hbm_bytes),
        fits_calibrated=bool(pk / CPU_MEMORY_OVERESTIMATE <= chip.hbm_bytes),
        compute_s=rf["compute_s"], memory_s=rf["memory_s"], comm_s=rf["comm_s"],
        comm_ici_s=tot["ici"] / chip.ici_bw, comm_dcn_s=tot["dcn"] / chip.dcn_bw,
        useful_compute_s=rep["model_flops"] / n / chip.peak_bf16_flops,
        compiled_flops_per_device=tot["flops"])
