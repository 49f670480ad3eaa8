"""The planned configuration every real preset's stage ships: one table (`PLANS`) that the experiment files apply
(`apply_stage`, `apply_rl`) after setting their own batch and sequence length.

Each entry is the best fitting plan `python -m composer2_jax.plan` found for the preset's documented hardware
(docs/scaling.md, "Shipped configurations", names each one with the command that produced it): its chip and
count, mesh, the sequences per compiled step, the remat policy, the capacity-mode expert buffers and the
attention kernel. A stage whose global batch is larger than the plan's step reaches it by gradient accumulation
(step.grad_accum = batch / plan batch), so every micro-step has the shape the planner compiled. `fits` is the
planner's verdict after its CPU calibration (None: not planned for this preset; `note` says whose plan it
borrows and why), and a stage with no fitting plan says so in `note`. The toy and the MaxText stand-ins have no
entry: they keep their own settings. `python -m experiments.<stage> --config=...:PRESET --dry_run` compiles
what a config ships.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from composer2_jax.model.attention_memory import MEMORY_SAFE_KERNELS


@dataclasses.dataclass(frozen=True)
class Plan:
    """One planned configuration of a preset × stage."""

    chip: str  # accelerator the plan is for (composer2_jax/chips.py)
    chips: int  # devices of the plan's mesh
    mesh: tuple[tuple[str, int], ...]  # mesh axes other than 1 (sharding.MeshConfig; the rest are 1)
    batch: int  # sequences per compiled (micro-)step the planner compiled
    seq_len: int  # tokens per sequence the plan is for
    remat_policy: str  # model.remat_policy
    capacity_factor: float  # model.moe_capacity_factor (capacity-mode dispatch, model.moe_impl='capacity')
    attention_kernel: str  # model.attention_kernel (memory-safe: attention_memory.MEMORY_SAFE_KERNELS)
    source: str  # the planner (or dry-run) command that produced the plan, and its date; "" = not planned
    fits: Optional[bool]  # the planner's calibrated verdict; None: borrowed, not planned for this preset
    figures: str = ""  # what the planner reported (calibrated MFU, CPU-compiled peak)
    note: str = ""  # provenance when borrowed; why not where no plan fits
    dry_run: str = ""  # what this preset × stage's own `--dry_run` compiled (the stage's optimizer, MTP, accumulation)

    def __post_init__(self):
        if self.attention_kernel not in MEMORY_SAFE_KERNELS:
            raise ValueError(f"plan attention_kernel={self.attention_kernel!r}; expected one of {MEMORY_SAFE_KERNELS}")

    def mesh_dict(self) -> dict[str, int]:
        """The full MeshConfig dict (every axis; 1 where the plan names none)."""
        out = dict(stage=1, data=1, fsdp=1, expert=1, tensor=1, context=1)
        out.update(dict(self.mesh))
        return out


PLAN_CMD = "python -m composer2_jax.plan"
_K25_BULK = Plan(
    "h200", 256, (("fsdp", 32), ("expert", 8)), 256, 32768, "full", 1.0, "xla_causal_skip",
    f"{PLAN_CMD} --preset kimi_k2_5 --stage cpt_bulk --mesh data=1,fsdp=32,expert=8 --chip h200 --search_execution "
    "--remat full --capacity 1.0,1.25 --causal_skip 0,1 --json (2026-12-02)", True,
    "20.6 % calibrated MFU, 51.0 s calibrated step, 164,500 tokens/s; 253.5 GB/device compiled on CPU (fits "
    "after the ÷ 2.0 calibration)")
_K25_LONG = Plan(
    "h200", 256, (("fsdp", 4), ("expert", 8), ("context", 8)), 32, 262144, "full", 1.25, "ring",
    f"{PLAN_CMD} --preset kimi_k2_5 --stage cpt_long --mesh data=1,fsdp=4,expert=8,context=8 --chip h200 "
    "(2026-11-30)", True,
    "24.3 % calibrated MFU, 159.7 s calibrated step, 52,500 tokens/s; 263.8 GB/device compiled on CPU (fits "
    "after the ÷ 2.0 calibration)")
_K25_SFT = dataclasses.replace(
    _K25_BULK, note="the cpt_bulk plan: the planner's sft stage has cpt_bulk's shapes (32k, one sequence per "
                    "data-parallel shard, the same model), so the same plan")
_K25_RL = Plan(
    "h200", 256, (("fsdp", 8), ("expert", 8), ("context", 4)), 64, 65536, "full", 1.25, "ring",
    f"{PLAN_CMD} --preset kimi_k2_5 --stage rl --mesh data=1,fsdp=8,expert=8,context=4 --chip h200 (2026-11-30)",
    True, "7.5 % calibrated MFU, 96.4 s calibrated step, 43,500 tokens/s; 173.8 GB/device compiled on CPU (fits "
          "after the ÷ 2.0 calibration); communication-bound at 64 sequences a step")


def _borrowed(plan: Plan, preset: str, why: str) -> Plan:
    """`plan` (planned for kimi_k2_5) shipped for `preset`, unverified by the planner: fits=None and a note."""
    return dataclasses.replace(plan, fits=None, note=f"kimi_k2_5's plan, not planned for {preset}: {why}; "
                                                     f"--dry_run checks the memory")


_GS_BULK = Plan(
    "h200", 1, (), 1, 8192, "full", 1.0, "xla_causal_skip",
    "python -m experiments.cpt_bulk --config=experiments/cpt_bulk.py:gpu_small --dry_run --dry_run_chip=h200 "
    "--dry_run_chips=1 (2026-12-06: the planner's memory compile and roofline of this execution)", True,
    "128.0 GB/device compiled on CPU (fits 141 GB uncalibrated); 15.3 % calibrated MFU, 3.83 s calibrated step of "
    "8 × 8,192 tokens, 17,100 tokens/s",
    note="execution not searched for gpu_small: kimi_k2_5's searched best (full remat, capacity 1.0, causal "
         "skipping) on the one-device mesh, checked by the dry run")
_GS_LONG = Plan(
    "h200", 8, (("context", 8),), 1, 262144, "full", 1.0, "ring", "", None,
    note="no plan fits gpu_small's documented single H200 at 256k: the fwd+bwd alone compiles to 332.89 GB "
         "(benchmarks/RESULTS.md); shipped on 8×H200 with the ring over context=8, not planned")
_GS_SFT = Plan(
    "h200", 1, (), 1, 32768, "full", 1.0, "xla_causal_skip", "", None,
    note="not planned in this session: cpt_bulk's execution on one H200 at 32k; its dry run (2026-12-07) does not "
         "fit as compiled: 150.0 GB with the stage's AdamW (75.0 GB after the ÷ 2.0 calibration)")
_GS_RL = dataclasses.replace(
    _GS_BULK, note="the cpt_bulk plan's step (1 × 8,192 tokens per update, one H200): RL rows pack whole episodes "
                   "(harness.max_total_tokens ≤ 1,024) into 8k rows; the trainer update's dry run fits: 123.3 GB")

_K2_WHY = "the same shapes but no MTP module (smaller)"
_DS3_WHY = "128 heads (2× the attention) and 256 experts: not planned in this session"

# `python -m experiments.<stage> --config=experiments/<stage>.py:<preset> --dry_run` (full depth; docs/scaling.md,
# "Dry runs of every shipped real-preset configuration"): per-device peak compiled on CPU and the calibrated verdict.
_DRY_RUN_DATE = "2026-12-07"
_H200_GB = 141.0  # every plan's chip (chips.py: h200)
_DRY_RUNS = {
    ("gpu_small", "cpt_bulk"): (128.0, True), ("gpu_small", "cpt_long"): (59.2, True),
    ("gpu_small", "sft"): (150.0, True), ("gpu_small", "rl"): (123.3, True),
    ("kimi_k2_5", "cpt_bulk"): (265.5, True), ("kimi_k2_5", "cpt_long"): (308.0, False),
    ("kimi_k2_5", "sft"): (241.2, True), ("kimi_k2_5", "rl"): (211.8, True),
    ("kimi_k2", "cpt_bulk"): (233.4, True), ("kimi_k2", "cpt_long"): (270.7, True),
    ("kimi_k2", "sft"): (223.9, True), ("kimi_k2", "rl"): (168.8, True),
    ("deepseek_v3", "cpt_bulk"): (332.8, False), ("deepseek_v3", "cpt_long"): (434.7, False),
    ("deepseek_v3", "sft"): (310.3, False), ("deepseek_v3", "rl"): (254.3, True),
}


def _dry_run_line(key: tuple[str, str]) -> str:
    """The dry run's figures as a sentence."""
    peak, fits = _DRY_RUNS[key]
    verdict = ("fits as compiled" if peak <= _H200_GB else "fits after the ÷ 2.0 calibration" if fits
               else "does NOT fit even after the ÷ 2.0 calibration")
    return f"{peak:.1f} GB/device compiled on CPU ({_DRY_RUN_DATE}) against {_H200_GB:.0f} GB: {verdict}"


_PLANS: dict[tuple[str, str], Plan] = {
    ("gpu_small", "cpt_bulk"): _GS_BULK,
    ("gpu_small", "cpt_long"): _GS_LONG,
    ("gpu_small", "sft"): _GS_SFT,
    ("gpu_small", "rl"): _GS_RL,
    ("kimi_k2_5", "cpt_bulk"): _K25_BULK,
    ("kimi_k2_5", "cpt_long"): _K25_LONG,
    ("kimi_k2_5", "sft"): _K25_SFT,
    ("kimi_k2_5", "rl"): _K25_RL,
    **{("kimi_k2", s): _borrowed(p, "kimi_k2", _K2_WHY)
       for s, p in (("cpt_bulk", _K25_BULK), ("cpt_long", _K25_LONG), ("sft", _K25_SFT), ("rl", _K25_RL))},
    **{("deepseek_v3", s): _borrowed(p, "deepseek_v3", _DS3_WHY)
       for s, p in (("cpt_bulk", _K25_BULK), ("cpt_long", _K25_LONG), ("sft", _K25_SFT), ("rl", _K25_RL))},
}
PLANS: dict[tuple[str, str], Plan] = {k: dataclasses.replace(p, dry_run=_dry_run_line(k)) for k, p in _PLANS.items()}

REAL_PRESETS = ("gpu_small", "kimi_k2_5", "kimi_k2", "deepseek_v3")
STAGES = ("cpt_bulk", "cpt_long", "sft", "rl")


def plan_for(preset: str, stage: str) -> Optional[Plan]:
    """The shipped plan of a preset × stage; None for presets without one (toy, the MaxText stand-ins)."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; expected one of {STAGES}")
    if preset not in REAL_PRESETS:
        return None
    return PLANS[(preset, stage)]


def _apply_model(model, plan: Plan):
    """The plan's execution fields on a ConfigDict model section."""
    model.update(remat_policy=plan.remat_policy, moe_impl="capacity", moe_capacity_factor=plan.capacity_factor,
                 moe_gmm_impl="padded", attention_kernel=plan.attention_kernel)


def apply_stage(c, preset: str, stage: str):
    """Set a training stage's ConfigDict to its plan (mesh, chip, model execution, gradient accumulation), after
    the stage has set its batch and sequence length; a no-op for presets without a plan."""
    plan = plan_for(preset, stage)
    if plan is None:
        return c
    if c.data.seq_len != plan.seq_len or c.data.batch_size % plan.batch:
        raise ValueError(f"{preset}/{stage}: data {c.data.batch_size} × {c.data.seq_len} does not match the plan's "
                         f"{plan.batch} × {plan.seq_len} (batch must be a multiple: gradient accumulation)")
    _apply_model(c.model, plan)
    c.mesh.update(plan.mesh_dict())
    c.chip = plan.chip
    c.step.grad_accum = c.data.batch_size // plan.batch
    return c


def apply_rl(c, preset: str):
    """Set an RL ConfigDict's trainer (mesh, devices, rows × seq_len) and model execution to its plan."""
    plan = plan_for(preset, "rl")
    if plan is None:
        return c
    _apply_model(c.model, plan)
    c.trainer.mesh.update(plan.mesh_dict())
    c.trainer.update(devices=plan.chips, rows=plan.batch, seq_len=plan.seq_len)
    return c
