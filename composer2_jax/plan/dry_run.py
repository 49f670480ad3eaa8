"""`--dry_run`: compile a training stage's config exactly as given on simulated devices of a named chip and count,
and report one JSON-able dict: the compiled per-device peak (`memory_analysis`), whether it fits the chip's HBM,
and the planner's calibrated step time, MFU and tokens/s for it.

What is compiled is the stage's own train step (`train/step.make_train_step` with the config's step, optimizer,
schedule and QK-clip settings, on `sharding.make_mesh(config.mesh)`, at the config's batch and sequence length),
with the stage's own model section: `init_from` is not read (no checkpoint is needed), and the kernels resolve as on
the named accelerator (`model/planning.accelerator_kernels`: 'auto' picks the accelerator's path, as
`composer2_jax.plan` does). `depth='extrapolate'` compiles the same config with two and with three scan units of
the decoder stack instead of all of them, extrapolates the resident bytes and the micro-batch loop's temporaries
linearly in the units, and takes the optimizer update's temporaries from a compile of the update alone at full depth
(`plan/extrapolate.py`), for configs whose full compile is too slow on a CPU host; the report says so
(`memory_from`). The step time comes from the planner's roofline of the same model on the same mesh for one
micro-batch (batch / step.grad_accum sequences), times grad_accum (`roofline_from`). The devices must already
exist (experiments/dry_run.py sets the simulated count before jax starts).
"""

from __future__ import annotations

import dataclasses

import jax

from composer2_jax import chips
from composer2_jax import sharding as shd
from composer2_jax.model import Transformer, planning
from composer2_jax.plan.calibration import CPU_MEMORY_OVERESTIMATE
from composer2_jax.plan.extrapolate import extrapolated_peak
from composer2_jax.plan.roofline import RooflineStep, StepCosts, _roofline
from composer2_jax.plan.step import _unit_costs, peak_bytes
from composer2_jax.sharding import activate
from composer2_jax.train import optim as optim_lib
from composer2_jax.train.state import abstract_train_state
from composer2_jax.train.step import batch_shardings, make_train_step

DEPTHS = ("full", "extrapolate")


def compile_stage(run, model_cfg, mesh):
    """(compiled, abstract state) of the stage's jitted train step for abstract inputs on `mesh`."""
    model = Transformer(model_cfg, mesh)
    oc, dc = run.optim, run.data
    make_tx = lambda p, names: optim_lib.make_optimizer(oc, p, names, mesh)  # noqa: E731
    abstract, shardings, tx = abstract_train_state(model, make_tx, mesh, (dc.batch_size, dc.seq_len))
    bs = batch_shardings(mesh)
    batch_abs = {k: jax.ShapeDtypeStruct((dc.batch_size, dc.seq_len), jax.numpy.int32, sharding=s)
                 for k, s in bs.items()}
    with activate(mesh), planning.accelerator_kernels():
        step = jax.jit(make_train_step(model, tx, run.step, optim_lib.schedule(oc), oc.qk_clip_tau),
                       donate_argnums=0, in_shardings=(shardings, bs), out_shardings=(shardings, None))
        return step.lower(abstract, batch_abs).compile(), abstract


def _peak(sh: "StepShape", cfg, mesh, depth: str) -> tuple[int, object, str]:
    """(per-device peak bytes, abstract state of the full model, how the peak was obtained)."""
    if depth == "full":
        compiled, abstract = sh.compile(cfg, mesh)
        return peak_bytes(compiled.memory_analysis()), abstract, "full compile"
    peak, how = extrapolated_peak(sh.compile, cfg, sh.optim, mesh, (sh.batch, sh.seq_len))
    model = Transformer(cfg, mesh)
    abstract, _, _ = abstract_train_state(model, lambda p_, n_: optim_lib.make_optimizer(sh.optim, p_, n_, mesh), mesh,
                                          (sh.batch, sh.seq_len))
    return peak, abstract, how


def _estimate(sh: "StepShape", cfg, mesh, chip, abstract) -> dict:
    """The planner's roofline (calibrated) of one micro-batch on `mesh`, scaled to the compiled step."""
    micro, seq, n = sh.batch // sh.grad_accum, sh.seq_len, mesh.devices.size
    if mesh.shape.get("stage", 1) > 1:
        return dict(roofline_from="not estimated: pipelined meshes are planned by python -m composer2_jax.plan")
    base, delta, n_units, _ = _unit_costs(cfg, mesh, micro, seq, sh.optim.name, chip.node_size)
    tot = {k: base[k] + (n_units - 1) * delta[k] for k in delta}
    r = _roofline(StepCosts.of(tot), RooflineStep(cfg, abstract, chip, n, micro, seq))
    step_s = r["roofline"]["step_calibrated_s"] * sh.grad_accum
    return dict(step_calibrated_s=float(f"{step_s:.4g}"), mfu_calibrated=round(r["est_mfu_calibrated"], 4),
                tokens_per_s_calibrated=float(f"{sh.batch * seq / step_s:.4g}"),
                executed_over_useful_flops=round(r["executed_over_useful_flops"], 3),
                roofline_from=f"planner roofline (composer2_jax/plan) of one micro-batch of {micro} × {seq} (1- and "
                              f"2-unit unrolled compiles of the train step, {sh.optim.name}) × grad_accum "
                              f"{sh.grad_accum}, calibrated ÷ 0.566; the optimizer update is counted per "
                              f"micro-batch, so with grad_accum > 1 the step is an upper bound")


def dry_run(sh: "StepShape", chip_name: str, n_chips: int, depth: str = "full") -> dict:
    """Compile `sh` (`stage_shape` / `rl_shape` of a frozen config) on `n_chips` simulated devices of `chip_name`
    (module docstring); the one-line report."""
    if depth not in DEPTHS:
        raise ValueError(f"dry run depth {depth!r}; expected one of {DEPTHS}")
    if n_chips != jax.device_count():
        raise ValueError(f"dry run on {n_chips} chips, but this process has {jax.device_count()} devices; expected "
                         f"XLA_FLAGS=--xla_force_host_platform_device_count={n_chips} set before jax starts")
    from composer2_jax.train.loop import validate_layout

    chip, mesh, cfg = chips.get_chip(chip_name), shd.make_mesh(sh.mesh), sh.model
    validate_layout(cfg, mesh, sh.batch // sh.grad_accum, sh.seq_len, 1)
    peak, abstract, how = _peak(sh, cfg, mesh, depth)
    out = dict(dry_run=sh.name, preset=sh.preset, chip=chip.name, chips=n_chips,
               mesh={a: int(s) for a, s in mesh.shape.items() if s > 1}, batch=sh.batch, seq_len=sh.seq_len,
               grad_accum=sh.grad_accum, attention_kernel=cfg.attention_kernel, remat_policy=cfg.remat_policy,
               moe_impl=cfg.moe_impl, moe_capacity_factor=cfg.moe_capacity_factor, optimizer=sh.optim.name,
               peak_bytes_per_device=int(peak), hbm_bytes=int(chip.hbm_bytes), fits=bool(peak <= chip.hbm_bytes),
               fits_calibrated=bool(peak / CPU_MEMORY_OVERESTIMATE <= chip.hbm_bytes), depth=depth,
               memory_from=f"{how} on {n_chips} simulated host devices; fits_calibrated: peak ÷ "
                           f"{CPU_MEMORY_OVERESTIMATE} (the planner's CPU-compile overestimate)")
    out.update(_estimate(sh, cfg, mesh, chip, abstract))
    return out


@dataclasses.dataclass(frozen=True)
class StepShape:
    """What a dry run compiles, common to a training stage and the RL trainer: the model section, optimizer, mesh,
    batch (sequences per compiled step), sequence length, gradient accumulation and the compile itself."""

    preset: str
    name: str  # the stage's workdir
    model: object  # ModelConfig
    optim: object  # OptimConfig
    mesh: object  # MeshConfig
    batch: int
    seq_len: int
    grad_accum: int
    compile: object  # (model_cfg, mesh) -> (compiled, abstract state)


def stage_shape(run) -> StepShape:
    """A frozen StageConfig's dry-run shape: its train step (`compile_stage`)."""
    return StepShape(run.preset, run.workdir, run.model, run.optim, run.mesh, run.data.batch_size, run.data.seq_len,
                     run.step.grad_accum, lambda cfg, mesh: compile_stage(run, cfg, mesh))


def rl_shape(run) -> StepShape:
    """A frozen RLExperimentConfig's dry-run shape: the trainer's update (`compile_rl_update`) on its mesh, at
    trainer.rows × trainer.seq_len (one update; the version's first, whose π_prox comes from its own forward)."""
    tc = run.trainer
    return StepShape(run.preset, run.workdir, run.model, run.optim, tc.mesh, tc.rows, tc.seq_len, 1,
                     lambda cfg, mesh: compile_rl_update(run, cfg, mesh))


def compile_rl_update(run, model_cfg, mesh):
    """(compiled, abstract state) of the RL trainer's jitted update (rl/services/rl_step.make_update_fn) for abstract
    packed rows on `mesh`, with the routing records when router replay is on and π_ref's log-probs when the loss
    has a KL term."""
    from composer2_jax.model.layer_plan import moe_layer_ids
    from composer2_jax.rl.services.rl_step import make_update_fn

    tc, law = run.trainer, run.rollout
    model = Transformer(model_cfg, mesh)
    make_tx = lambda p, names: optim_lib.make_optimizer(run.optim, p, names, mesh)  # noqa: E731
    abstract, shardings, tx = abstract_train_state(model, make_tx, mesh, (tc.rows, tc.seq_len))
    spec = shd.logical_to_spec(("activation_batch", "activation_length"))
    tok = jax.sharding.NamedSharding(mesh, spec)
    arr = lambda shape, dt, s=tok: jax.ShapeDtypeStruct(shape, dt, sharding=s)  # noqa: E731
    bt, i32, f32 = (tc.rows, tc.seq_len), jax.numpy.int32, jax.numpy.float32
    batch = {k: arr(bt, i32) for k in ("tokens", "targets", "positions", "segment_ids")}
    batch.update({k: arr(bt, f32) for k in ("loss_mask", "behav_logprobs", "advantages")})
    routing = None
    if tc.router_replay and model_cfg.n_routed_experts:
        route = jax.sharding.NamedSharding(mesh, shd.logical_to_spec((None, "activation_batch", "activation_length",
                                                                      None)))
        routing = arr((len(moe_layer_ids(model_cfg)),) + bt + (model_cfg.num_experts_per_tok,), i32, route)
    ref = arr(bt, f32) if run.loss.kl_coef > 0 else None
    temperature = getattr(law, "temperature", 1.0)
    with activate(mesh), planning.accelerator_kernels():
        update = jax.jit(make_update_fn(model, tx, run.loss, temperature), donate_argnums=0)
        return update.lower(abstract, batch, routing, None, ref).compile(), abstract
