"""Roofline step time and MFU from a step's per-device costs: unpipelined (`_roofline`), pipelined
(`_pipelined_roofline`, from one stage's sub-mesh), and the expert all-to-all hidden by the MoE overlap."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax

from composer2_jax import sharding as shd
from composer2_jax.chips import matmul_peak
from composer2_jax.model.layer_plan import SCANNED_STACK
from composer2_jax.model.pipeline import runs_per_shard
from composer2_jax.params import count_params
from composer2_jax.plan.calibration import REFERENCE_EFFICIENCY
from composer2_jax.plan.step import _optimizer_cost, _shard_bytes, _unit_costs
from composer2_jax.train.metrics import flops_per_token


class StepCosts(NamedTuple):
    """Per-device cost totals of one train step (what XLA's cost analysis and the collectives give)."""

    flops: float  # executed FLOPs
    hbm: float  # HBM bytes accessed
    ici: float  # wire bytes inside a node (ICI / NVLink)
    dcn: float  # wire bytes across nodes (DCN / InfiniBand)

    @classmethod
    def of(cls, tot: Mapping[str, float]) -> StepCosts:
        """From a cost dict keyed flops, bytes, ici, dcn (plan/step.py `_unit_costs`)."""
        return cls(tot["flops"], tot["bytes"], tot["ici"], tot["dcn"])


@dataclasses.dataclass(frozen=True)
class RooflineStep:
    """The train step a roofline estimates."""

    cfg: Any  # the ModelConfig as compiled
    abstract: Any  # its abstract train state (parameter counts, shard bytes)
    chip: Any  # chips.Chip: peaks and bandwidths
    n: int  # devices of the mesh
    batch: int  # global batch in sequences
    seq: int  # sequence length


def fp8_matmul_flops_per_token(cfg) -> float:
    """Train-step FLOPs per token of the matmuls model.matmul_precision = 'fp8' runs in FP8 (model/fp8.py), 0 when
    it is 'bf16': every trunk and MTP layer's FFN — the dense SwiGLU (3 matmuls of D·I), or the routed experts
    (`expert_flops_per_token`) and the shared experts (3 matmuls of D·F·n_shared) — × 2 FLOPs, × the passes
    `expert_flops_per_token` counts (forward, backward ×2, remat recompute). Attention, router, LM head: bf16."""
    if cfg.matmul_precision != "fp8":
        return 0.0
    passes = 3 + (cfg.remat_policy not in ("none", "dots", "dots_no_batch"))
    d, total = cfg.hidden_size, 0.0
    for i in range(cfg.num_layers + cfg.num_mtp_layers):  # MTP depth m is layer num_layers + m by DeepSeek's rule
        if cfg.is_moe_layer(i):
            total += expert_flops_per_token(cfg) + 3 * 2 * d * cfg.moe_intermediate_size * cfg.n_shared_experts * passes
        else:
            total += 3 * 2 * d * cfg.intermediate_size * passes
    return total


def compute_seconds(flops: float, fp8_flops: float, chip) -> dict:
    """Compute time of `flops` per device of which `fp8_flops` (at most all of them) run at the chip's FP8 peak and
    the rest at its bf16 peak."""
    fp8_flops = min(fp8_flops, flops)
    t = (flops - fp8_flops) / chip.peak_bf16_flops
    if fp8_flops:
        t += fp8_flops / matmul_peak(chip, "fp8")
    return dict(compute_s=t, fp8_flops=fp8_flops)


def _roofline(costs: StepCosts, step: RooflineStep) -> dict:
    """The per-device cost totals of one step turned into the roofline times and the MFU / tokens/s estimates.

    With model.matmul_precision = 'fp8' the FFN matmuls (`fp8_matmul_flops_per_token` × the device's share of the
    step's tokens, batch·seq / n: the FFN work every mesh axis splits evenly; a pipelined step's bubble repeats
    some, counted at bf16 here, the conservative side) run at the FP8 peak, the rest at bf16. MFU stays
    bf16-equivalent: model FLOPs over the bf16 peak."""
    flops, hbm, ici, dcn = costs
    cfg, chip, n, batch, seq = step.cfg, step.chip, step.n, step.batch, step.seq
    fp8 = compute_seconds(flops, fp8_matmul_flops_per_token(cfg) * batch * seq / n, chip)
    t_compute = fp8["compute_s"]
    t_memory = hbm / chip.hbm_bw
    t_comm = ici / chip.ici_bw + dcn / chip.dcn_bw
    step_s = max(t_compute, t_memory) + t_comm  # pessimistic: no overlap, XLA:CPU's unfused bytes
    step_lower_s = max(t_compute, t_comm)  # optimistic: perfect overlap, fused memory traffic
    step_cal_s = step_lower_s / REFERENCE_EFFICIENCY  # the headline estimate
    _, active = count_params(step.abstract.params, cfg)
    model_flops = flops_per_token(cfg, active, seq) * batch * seq
    return dict(
        compiled_flops_per_device=flops, hbm_bytes_per_device=hbm, ici_bytes_per_device=ici, dcn_bytes_per_device=dcn,
        matmul_precision=cfg.matmul_precision, fp8_flops_per_device=fp8["fp8_flops"],
        roofline=dict(compute_s=t_compute, memory_s=t_memory, comm_s=t_comm, step_s=step_s,
                      step_lower_s=step_lower_s, step_calibrated_s=step_cal_s,
                      bound="compute" if t_compute >= t_memory else "memory"),
        model_flops=model_flops, est_mfu=model_flops / (step_s * chip.peak_bf16_flops * n),
        tokens_per_s=batch * seq / step_s,
        est_mfu_calibrated=model_flops / (step_cal_s * chip.peak_bf16_flops * n),
        tokens_per_s_calibrated=batch * seq / step_cal_s,
        executed_over_useful_flops=flops * n / model_flops)


# Collective kinds whose bytes are set by the parameters (FSDP gathers of weights, reduction of their gradients),
# not by the tokens; the rest (expert all-to-all, ...) scale with the tokens a unit processes.
_PARAM_COLLECTIVES = ("all-gather", "reduce-scatter", "all-reduce")


def _split_collectives(colls) -> dict:
    """Wire bytes per device by (parameter vs token collective) × (inside a node: ICI / NVLink, across: DCN / IB);
    `gather_*` is the parameter collectives' all-gather part (the FSDP weight gathers), the rest of `param_*` their
    gradient reductions."""
    out = dict(param_ici=0.0, param_dcn=0.0, token_ici=0.0, token_dcn=0.0, gather_ici=0.0, gather_dcn=0.0)
    for c in colls:
        link = "dcn" if c.crosses_nodes else "ici"
        out[("param_" if c.kind in _PARAM_COLLECTIVES else "token_") + link] += c.wire_bytes
        if c.kind == "all-gather":
            out["gather_" + link] += c.wire_bytes
    return out


_A2A_KINDS = ("all-to-all", "ragged-all-to-all")


def moe_overlap_hidden(a2a_s: float, expert_s: float, chunks: int) -> dict:
    """Expert all-to-all time hidden under expert compute by model.moe_overlap_chunks = C (docs/scaling.md
    "Overlap").

    Per MoE layer the tokens run as C chunks, each with a dispatch and a combine all-to-all (a = a2a_s / C per chunk,
    half each way) and an expert FFN (f = expert_s / C). The software pipeline (model/expert_parallel.py
    `overlap_chunks`) runs chunk i's FFN while chunk i+1's dispatch and chunk i−1's combine are in flight, so only
    the first chunk's dispatch and the last chunk's combine are exposed:
        t = a/2 + Σ_i max(f, comm_i) + a/2,   comm_i = a/2·[i > 0] + a/2·[i < C − 1]
    and the hidden all-to-all time is a2a_s + expert_s − t = Σ_i min(f, comm_i): all but 1/C of the all-to-all
    when compute covers it, at most the compute available otherwise. C = 1 hides nothing.
    """
    if not isinstance(chunks, int) or chunks < 1:
        raise ValueError(f"moe_overlap_chunks must be an int >= 1, got {chunks!r}")
    a, f = a2a_s / chunks, expert_s / chunks
    comm = [a / 2 * (i > 0) + a / 2 * (i < chunks - 1) for i in range(chunks)]
    hidden = sum(min(f, c) for c in comm)
    return dict(chunks=chunks, a2a_s=a2a_s, expert_compute_s=expert_s, a2a_hidden_s=hidden,
                a2a_exposed_s=a2a_s - hidden, moe_serial_s=a2a_s + expert_s,
                moe_overlapped_s=a2a_s + expert_s - hidden)


def _a2a_wire(colls) -> tuple[float, float]:
    """(intra-node, inter-node) wire bytes per device of the all-to-alls among `colls`."""
    ici = sum(c.wire_bytes for c in colls if c.kind in _A2A_KINDS and not c.crosses_nodes)
    dcn = sum(c.wire_bytes for c in colls if c.kind in _A2A_KINDS and c.crosses_nodes)
    return ici, dcn


def expert_flops_per_token(cfg) -> float:
    """Executed expert-FFN FLOPs per token and MoE layer in a train step, summed over the experts a device runs
    for it: k assignments (× the capacity factor in capacity mode: the buffer is computed whole) × 3 matmuls of
    D·F × 2 FLOPs, × 3 for forward and backward, + 1 forward again when the layer's remat policy recomputes the
    matmuls."""
    rows = cfg.num_experts_per_tok * (cfg.moe_capacity_factor if cfg.moe_impl == "capacity" else 1.0)
    passes = 3 + (cfg.remat_policy not in ("none", "dots", "dots_no_batch"))
    return rows * 3 * 2 * cfg.hidden_size * cfg.moe_intermediate_size * passes


def _moe_overlap_report(cfg, colls_1, colls_2, n_unit_passes: float, tokens_per_pass: float, mesh, chip) -> dict:
    """`moe_overlap_hidden` for a step: the all-to-all of one unit from the 1- and 2-unit compiles × the unit
    passes, the expert compute from `expert_flops_per_token` × the tokens a device's experts process per pass
    (its share of the routed tokens: tokens_per_pass / the devices that split tokens, times the `tensor` split of
    the expert width)."""
    (i1, d1), (i2, d2) = _a2a_wire(colls_1), _a2a_wire(colls_2)
    a2a_s = n_unit_passes * ((i2 - i1) / chip.ici_bw + (d2 - d1) / chip.dcn_bw)
    tensor = shd.axis_size(mesh, shd.mesh_axes_of("moe_mlp"))
    expert_s = n_unit_passes * tokens_per_pass * expert_flops_per_token(cfg) / tensor / matmul_peak(
        chip, cfg.matmul_precision)
    return moe_overlap_hidden(max(a2a_s, 0.0), expert_s, cfg.moe_overlap_chunks)


def param_collective_passes(cfg, mesh_shape: dict, spec) -> tuple[int, int]:
    """(weight all-gathers, gradient reductions) of one unit's parameters per step of a pipelined stack, in units
    of the unrolled compile's one-unit collectives, as the compiled program runs them (model/pipeline.py):
      model.pipeline_gather_params off: GSPMD gathers and reduces inside the schedule loop, at each of the
        (M·R + S − 1)·L unit passes, both;
      on, tensor = context = 1: the per-shard schedule (`_run_per_shard`) gathers a stage's R·L units once
        before the loop and reduces their accumulated gradients once after it: R·L, both;
      on, tensor or context > 1: the gathers once before the loop (R·L), the reductions still at every pass.
    The condition is the model's own (model/pipeline.py `runs_per_shard`, which transformer.py asks)."""
    passes = spec.iterations * spec.units_per_stage
    once = spec.repeats * spec.units_per_stage
    if not cfg.pipeline_gather_params:
        return passes, passes
    return once, once if runs_per_shard(cfg, mesh_shape) else passes


def pipelined_costs(cfg, mesh_shape: dict, chip, batch: int, seq: int, optimizer: str) -> dict:
    """The compiles `_pipelined_roofline` reads, none of which depends on the schedule (M, R): the 1- and 2-unit
    unrolled models on one stage's sub-mesh at B/S (per-microbatch costs are scaled from them), and a matrix
    optimizer's extra over AdamW on the whole mesh. `plan/schedule.py` compiles them once for all (M, R)."""
    s_ = mesh_shape["stage"]
    n = math.prod(mesh_shape.values())
    inner = shd.make_mesh(dict(mesh_shape, stage=1), devices=jax.devices()[: n // s_])
    flat = dataclasses.replace(cfg, pipeline_microbatches=0)
    # Per-pass costs from AdamW (elementwise, no collectives of its own); a matrix optimizer's extra work (Muon's
    # Newton–Schulz and its gathers) runs once per step on a stage's U/S units, not once per microbatch pass: it is
    # the difference of the optimizer update alone, Muon − AdamW, compiled for the real state on the whole mesh.
    base, delta, _, raw = _unit_costs(flat, inner, batch // s_, seq, "adamw", chip.node_size)
    return dict(base=base, delta=delta, raw=raw, inner=inner,
                opt_once=_optimizer_once(cfg, mesh_shape, batch, seq, optimizer, chip))


def regroup_bytes(abstract, spec) -> float:
    """Bytes a device sends over `stage` per step to regroup the stack's parameters for R > 1 virtual stages
    (model/pipeline.py `to_stages`: [U] → [S, R, L], (S − 1)/S of a device's stack shard moves) and their
    gradients back: 2 · (S − 1)/S · the device's stack parameter bytes; 0 for R = 1 (contiguous blocks)."""
    if spec.repeats == 1:
        return 0.0
    stack = abstract.params[SCANNED_STACK]
    return 2 * (spec.stages - 1) / spec.stages * _shard_bytes(stack)


def _pipelined_roofline(step: RooflineStep, mesh_shape: dict, spec, optimizer: str, costs: dict | None = None) -> dict:
    """Roofline of a pipelined mesh from the unrolled compiles of one stage's sub-mesh.

    A pipelined program's stack is a loop (the schedule) around a loop (the units), which XLA's cost analysis
    counts once, so the costs come from the stage's own sub-mesh (the mesh without `stage`, n/S devices, which
    keeps the device order and so which collectives cross nodes): the 1- and 2-unit unrolled models at the
    stage's share of the batch, B/S, give per device
      outer  = cost(1 unit) − Δ: embedding, dense prefix, head, MTP, loss — outside the pipeline the batch is split
               over `stage` too, so a device's share is the same as on the sub-mesh at B/S;
      unit   = Δ at B/S = M/S microbatches: one unit on one microbatch costs Δ·S/M in FLOPs, HBM bytes and
               token-proportional collectives (expert all-to-all), and the full parameter collectives (FSDP
               gathers, gradient reductions: they repeat for every microbatch a stage runs, M·R + S − 1 times
               per step; model.pipeline_gather_params gathers a stage's R·L units once per step before the
               schedule loop, so their all-gathers count R·L times per step, as in an unpipelined step; where
               the schedule then runs per shard (tensor = context = 1, model/pipeline.py `_run_per_shard`) the
               gradient reductions run once after the backward loop too (a reduce-scatter of each R·L units'
               accumulated gradient), so they count R·L times per step as well; with tensor or context > 1
               (GSPMD with the gathered layout) they stay inside the backward loop (tests/test_pipeline_parallel.py
               counts both inside and outside the loops), at every pass: `param_collective_passes`).
    A stage runs L units at each of the M·R + S − 1 iterations (M·R of them on real microbatches): executed stack
    work = (M·R + S − 1)·L units-on-a-microbatch, useful = M·R·L, i.e. compute × (1 + (S − 1)/(M·R)). The stage
    step's checkpoint (model/pipeline.py) adds one forward of the stack: Δ/4 of the FLOPs under per-layer remat
    (forward, recompute, backward ≈ 2 forwards), Δ/3 without. The stage sends: one [mb, T, D] bf16 activation per
    device and iteration forward and one gradient backward, over `stage` (the outermost axis: across nodes), plus
    the batch's move into and out of the schedule's buffer (twice [B/S, T, D] per stage group, forward and back).
    With R > 1 the stack's parameters are regrouped over `stage` each step and their gradients back
    (`regroup_bytes`), counted with the stage sends. Then, as for unpipelined meshes: t = max(compute, HBM) + comm,
    the optimistic bound max(compute, comm), and the calibrated estimate = bound / REFERENCE_EFFICIENCY.
    `costs`: `pipelined_costs` of the same config, mesh and batch (compiled once for a search over M and R).
    """
    cfg, abstract, chip, n, batch, seq = step.cfg, step.abstract, step.chip, step.n, step.batch, step.seq
    if n != math.prod(mesh_shape.values()):
        raise ValueError(f"RooflineStep.n={n}; expected the {math.prod(mesh_shape.values())} devices of {mesh_shape}")
    s_ = spec.stages
    costs = costs or pipelined_costs(cfg, mesh_shape, chip, batch, seq, optimizer)
    base, delta, raw, inner, opt_once = (costs[k] for k in ("base", "delta", "raw", "inner", "opt_once"))
    stack = _stack_costs(cfg, mesh_shape, spec, delta, raw)
    outer = {k: base[k] - delta[k] for k in ("flops", "bytes", "ici", "dcn")}
    # a stage's devices split the activations' batch over data × fsdp × expert and their length over `context`
    inner_split = (shd.axis_size(inner, shd.mesh_axes_of("activation_batch", shd.within_stage()))
                   * shd.axis_size(inner, shd.mesh_axes_of("activation_length", shd.within_stage())))
    pipe_bytes = _stage_send_bytes(cfg, spec, batch, seq, inner_split) + regroup_bytes(abstract, spec)
    pipe_crosses = n > chip.node_size  # `stage` is outermost: its neighbours sit n/S devices apart
    pipe_dcn, pipe_ici = (pipe_bytes, 0.0) if pipe_crosses else (0.0, pipe_bytes)
    flops = outer["flops"] + stack["flops"] + opt_once["flops"]
    hbm = outer["bytes"] + stack["bytes"] + opt_once["bytes"]
    ici = outer["ici"] + stack["ici"] + pipe_ici + opt_once["ici"]
    dcn = outer["dcn"] + stack["dcn"] + pipe_dcn + opt_once["dcn"]
    overlap = _moe_overlap_report(cfg, raw[0]["colls"], raw[1]["colls"], stack["passes"] * stack["per_mb"],
                                  (batch // s_) * seq / inner_split, inner, chip) if cfg.n_routed_experts else None
    return dict(
        _roofline(StepCosts(flops, hbm, ici, dcn), step), collectives_per_unit=raw[1]["kinds"],
        _moe_overlap=overlap,
        pipeline_costs=dict(_pipeline_costs(outer, stack, opt_once, pipe_bytes, pipe_crosses, ici, dcn, chip),
                            param_regroup_bytes=regroup_bytes(abstract, spec)))


def _optimizer_once(cfg, mesh_shape: dict, batch: int, seq: int, optimizer: str, chip) -> dict:
    """Per-device cost a matrix optimizer adds once per step over AdamW (`_pipelined_roofline`): the optimizer
    update alone, `optimizer` − AdamW, compiled for the real state on the whole mesh; zero for AdamW."""
    opt_once = dict(flops=0.0, bytes=0.0, ici=0.0, dcn=0.0)
    if optimizer != "adamw":
        mesh = shd.make_mesh(mesh_shape)
        c_opt = _optimizer_cost(cfg, mesh, batch, seq, optimizer, chip.node_size)
        c_adamw = _optimizer_cost(cfg, mesh, batch, seq, "adamw", chip.node_size)
        opt_once = {k: c_opt[k] - c_adamw[k] for k in opt_once}
    return opt_once


def _stack_costs(cfg, mesh_shape: dict, spec, delta: dict, raw) -> dict:
    """A step's cost of the pipelined stack per device (`_pipelined_roofline`'s docstring): the unit passes, one
    unit's collectives split into parameter and token ones, and the stack's FLOPs, HBM bytes and wire bytes."""
    m_, r_, l_ = spec.microbatches, spec.repeats, spec.units_per_stage
    per_mb = spec.stages / m_  # one microbatch's share of Δ (Δ was compiled at M/S microbatches)
    passes = spec.iterations * l_  # unit-on-a-microbatch passes a stage executes
    useful_passes = m_ * r_ * l_
    gather_passes, grad_passes = param_collective_passes(cfg, mesh_shape, spec)
    remat_extra = 1 / 4 if cfg.remat_policy != "none" else 0.0  # the stage step's own recompute
    split = {k: _split_collectives(raw[1]["colls"])[k] - _split_collectives(raw[0]["colls"])[k]
             for k in ("param_ici", "param_dcn", "token_ici", "token_dcn", "gather_ici", "gather_dcn")}  # one unit's
    param_ici, param_dcn, tok_ici, tok_dcn = (split[k] for k in ("param_ici", "param_dcn", "token_ici", "token_dcn"))
    # a step's parameter collectives: the weight gathers gather_passes times, the gradient reductions grad_passes
    param_ici_step = gather_passes * split["gather_ici"] + grad_passes * (param_ici - split["gather_ici"])
    param_dcn_step = gather_passes * split["gather_dcn"] + grad_passes * (param_dcn - split["gather_dcn"])
    unit_flops = delta["flops"] * per_mb
    return dict(per_mb=per_mb, passes=passes, useful_passes=useful_passes, gather_passes=gather_passes,
                grad_passes=grad_passes, remat_extra=remat_extra, split=split, tok_ici=tok_ici, tok_dcn=tok_dcn,
                param_ici_step=param_ici_step, param_dcn_step=param_dcn_step, unit_flops=unit_flops,
                flops=passes * unit_flops * (1 + remat_extra), useful_flops=useful_passes * unit_flops,
                bytes=passes * delta["bytes"] * per_mb * (1 + remat_extra),
                ici=param_ici_step + passes * tok_ici * per_mb, dcn=param_dcn_step + passes * tok_dcn * per_mb)


def _stage_send_bytes(cfg, spec, batch: int, seq: int, inner_split: int) -> float:
    """Bytes a device sends over `stage` per step: one bf16 [mb, T, D] activation forward and one gradient
    backward per iteration, plus the batch's move into and out of the schedule's buffer."""
    mb = batch // spec.microbatches
    send = mb * seq * cfg.hidden_size * 2 / inner_split  # bf16 [mb, T, D] per device
    return 2 * spec.iterations * send + 2 * 2 * (batch // spec.stages) * seq * cfg.hidden_size * 2 / inner_split


def _pipeline_costs(outer: dict, stack: dict, opt_once: dict, pipe_bytes: float, pipe_crosses: bool, ici: float,
                    dcn: float, chip) -> dict:
    """The report's `pipeline_costs`: where a pipelined step's FLOPs and wire bytes go."""
    passes, per_mb, unit_flops, split = stack["passes"], stack["per_mb"], stack["unit_flops"], stack["split"]
    gather_passes = stack["gather_passes"]
    return dict(
        outer_flops=outer["flops"], stack_flops_executed=stack["flops"], stack_flops_useful=stack["useful_flops"],
        bubble_flops=(passes - stack["useful_passes"]) * unit_flops,
        stage_remat_flops=passes * unit_flops * stack["remat_extra"],
        stage_send_bytes=pipe_bytes, stage_sends_cross_nodes=pipe_crosses,
        fsdp_and_grad_ici_bytes=stack["param_ici_step"], fsdp_and_grad_dcn_bytes=stack["param_dcn_step"],
        fsdp_gather_ici_bytes=gather_passes * split["gather_ici"],
        fsdp_gather_dcn_bytes=gather_passes * split["gather_dcn"], gather_passes=gather_passes,
        grad_reduction_passes=stack["grad_passes"], token_ici_bytes=passes * stack["tok_ici"] * per_mb,
        token_dcn_bytes=passes * stack["tok_dcn"] * per_mb, outer_ici_bytes=outer["ici"], outer_dcn_bytes=outer["dcn"],
        optimizer_extra_flops=opt_once["flops"], optimizer_extra_ici_bytes=opt_once["ici"],
        optimizer_extra_dcn_bytes=opt_once["dcn"],
        comm_ici_s=ici / chip.ici_bw, comm_dcn_s=dcn / chip.dcn_bw)

