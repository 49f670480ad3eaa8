"""Scale planning without the hardware: compile a stage's real train step on a simulated mesh of host CPU
devices, report per-device memory, the collectives, and a roofline step-time / MFU estimate.

    python -m composer2_jax.plan --preset kimi_k2_5 --stage cpt_bulk \
        --mesh data=1,fsdp=32,expert=8,tensor=1,context=1 --chip h200
    python -m composer2_jax.plan --preset kimi_k2_5 --stage cpt_long --search 256 --chip h200
    python -m composer2_jax.plan --validate        (the roofline against published MaxText step times)
    python -m composer2_jax.plan --preset kimi_k2_5 --stage cpt_bulk --mesh data=1,fsdp=32,expert=8 --chip h200 \
        --search_execution --remat full,save_attention_out --capacity 1.0,1.25 --causal_skip 0,1
                                                   (how to execute on that mesh: `search_execution`)
    python -m composer2_jax.plan --preset kimi_k2_5 --stage cpt_bulk --mesh stage=4,data=1,fsdp=8,expert=8 \
        --chip h200 --search_schedule --repeats_options 1,3,5 --execution full,1.0,1
                                                   (virtual stages × microbatches on a pipelined mesh:
                                                    composer2_jax/plan/schedule.py)
    python -m composer2_jax.plan --stage rl --mesh ... --pod 256   (trainer compiled, rollout side and pod split:
                                                                    composer2_jax/plan/rollout.py)

Method:
  1. Memory: the full model (scanned layers) is lowered and compiled for the mesh; `memory_analysis()` gives
     argument, output, alias and temporary bytes per device; parameter and optimizer bytes are the shard sizes
     of the abstract train state (what `init_train_state` allocates).
  2. FLOPs, HBM bytes and collectives: XLA's cost analysis counts a while-loop body once, so two unrolled
     models with 1 and 2 scan units are compiled and the per-unit cost is extrapolated linearly to all units;
     inside them the attention query chunks and the cross-entropy chunks are taken as one piece (every chunk
     costs the same, so one piece counts their FLOPs exactly: `model/planning.py: counting_loops`).
  Kernels: the planner compiles what an accelerator run executes where the CPU backend has a naive stand-in:
     blockwise attention (`xla_chunked`, and the query-chunked block kernel inside the ring: no [T, S] logits;
     it counts the masked half of causal blocks, as an XLA kernel would) and the padded grouped matmul for
     experts (`moe_gmm_impl='padded'`: XLA's cost analysis of ragged_dot counts every group densely; the padded
     FLOPs include the dropless slack). MoE dispatch defaults to capacity mode (factor 1.25): the dropless
     expert-parallel receive buffers are sized for the worst case (every token to one shard), which is what a
     dropless plan would have to budget.
  3. Roofline: t = max(FLOPs / peak, bytes / HBM bandwidth) + Σ collective bytes / link bandwidth (ICI inside a
     node or slice, DCN across), i.e. no compute/communication overlap (a conservative estimate; XLA:CPU's
     bytes-accessed also counts unfused, f32-normalised traffic). `step_lower_s` = max(FLOPs / peak, comm): perfect
     overlap and fused memory traffic, the optimistic end. `step_calibrated_s` = step_lower_s / REFERENCE_EFFICIENCY,
     the efficiency MaxText reached on the validation runs (4.): the planner's headline estimate.
     MFU = model FLOPs (6·N_active + causal attention, `train/metrics.py`) / (t · peak · chips).
  4. Checked against published step times (`--validate`, REFERENCES: MaxText's measured Llama-2-70B and
     Mixtral-8x7B steps on v6e-256, planned with MLA stand-ins of the same shape): the measured steps lie between
     the optimistic and the pessimistic bound, and the fraction of the optimistic rate they reached is
     REFERENCE_EFFICIENCY. The CPU compile overestimates memory on those runs (CPU_MEMORY_OVERESTIMATE,
     `fits_calibrated`). Measured figures: docs/scaling.md, "How far to trust the numbers". XLA:CPU also keeps bf16
     collectives in f32, so collective bytes are upper bounds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

from composer2_jax import chips
from composer2_jax.plan.calibration import REFERENCE_EFFICIENCY, REFERENCES
from composer2_jax.plan.stage import (
    EXECUTION_CAPACITIES,
    EXECUTION_REMATS,
    STAGES,
    _mesh_devices,
    _stage_config,
    parse_execution,
)


def _execution_human(out: dict) -> str:
    """The execution search as a table, then where the best candidate's time goes."""
    lines = [f"{out['preset']} / {out['stage']} on {out['chips']}×{out['chip']} mesh {out['mesh']}, "
             f"{out['global_batch']} × {out['seq_len']} tokens, {out['optimizer']}: "
             f"{len(out['candidates'])} executions in {out['search']['total_s']:.0f} s "
             f"({out['search']['memory_compiles']} memory, {out['search']['cost_compiles']} cost compiles)",
             "  remat               cap   skip  exec/useful  step s (cal.)  MFU (cal.)   tokens/s  peak GB  fits "
             "(raw/cal.)"]
    for row in out["candidates"]:
        e = row["execution"]
        lines.append(f"  {e['remat_policy']:<18} {e['capacity_factor']:5.2f}  {'yes' if e['causal_skip'] else 'no':<4} "
                     f"{row['executed_over_useful_flops']:11.2f} {row['step_calibrated_s']:14.2f} "
                     f"{row['est_mfu_calibrated']:10.1%} {row['tokens_per_s_calibrated']:10,.0f} "
                     f"{row['peak_bytes'] / 1e9:8.1f}  {'yes' if row['fits'] else 'no'}/"
                     f"{'yes' if row['fits_calibrated'] else 'no'}")
    best = out["best"]
    if best is None:
        lines.append(f"  no fitting execution: {out['reason']}")
        return "\n".join(lines)
    e = best["execution"]
    lines.append(f"  best that fits ({out['fit']}): remat {e['remat_policy']}, capacity {e['capacity_factor']}, "
                 f"causal skip {'on' if e['causal_skip'] else 'off'}: {best['est_mfu_calibrated']:.1%} calibrated MFU")
    bound = "communication" if best["comm_s"] > best["compute_s"] else "compute"
    lines.append(f"  the calibrated step is bound by {bound} (max(compute, comm) / {REFERENCE_EFFICIENCY})")
    lines.append(f"  where its time goes (per device, no overlap): compute {best['compute_s']:.2f} s = useful "
                 f"{best['useful_compute_s']:.2f} s + executed beyond useful "
                 f"{best['compute_s'] - best['useful_compute_s']:.2f} s; HBM {best['memory_s']:.2f} s; comm "
                 f"{best['comm_s']:.2f} s (intra-node {best['comm_ici_s']:.2f}, inter-node {best['comm_dcn_s']:.2f})")
    return "\n".join(lines)


def _human(report: dict) -> str:
    """A plan report as text: memory, pipeline, roofline, MoE overlap, collectives, rollout side."""
    pd = report["per_device"]
    g = lambda b: f"{b / 1e9:8.2f} GB"  # noqa: E731
    lines = [f"{report['preset']} / {report['stage']} on {report['chips']}×{report['chip']} mesh {report['mesh']}",
             f"  params {g(pd['params_bytes'])}  optimizer {g(pd['optimizer_bytes'])}  activations+temp "
             f"{g(pd['temp_bytes'])}  peak {g(pd['peak_bytes'])}  HBM {g(report['hbm_bytes'])}  "
             f"{'FITS' if report['fits'] else 'DOES NOT FIT'} (calibrated to published runs: "
             f"{'fits' if report['fits_calibrated'] else 'does not fit'})"]
    if "pipeline" in report:
        p = report["pipeline"]
        lines.append(f"  pipeline: {p['stages']} stages × {p['repeats']} repeats, {p['microbatches']} microbatches, "
                     f"{p['units_per_stage']} units per virtual stage; bubble {p['bubble']:.1%} "
                     f"((S − 1) / {p['ticks']} ticks; compiled schedule loops: {p['compiled_trips']} trips)")
    if "roofline" in report:
        r = report["roofline"]
        lines.append(f"  step ≈ {r['step_calibrated_s']:.3f} s calibrated (bounds {r['step_lower_s']:.3f}–"
                     f"{r['step_s']:.3f}: compute {r['compute_s']:.3f}, memory {r['memory_s']:.3f}, comm "
                     f"{r['comm_s']:.3f}); est. MFU {report['est_mfu_calibrated']:.1%}; "
                     f"{report['tokens_per_s_calibrated']:,.0f} tok/s")
        lines.append(f"  executed / useful FLOPs {report['executed_over_useful_flops']:.2f}")
        if "moe_overlap" in report:
            o = report["moe_overlap"]
            lines.append(f"  MoE overlap ({o['chunks']} chunks): expert all-to-all {o['a2a_s']:.3f} s, expert compute "
                         f"{o['expert_compute_s']:.3f} s, hidden {o['a2a_hidden_s']:.3f} s; step without overlap of "
                         f"the rest {r['step_overlap_s']:.3f} s")
        if "pipeline_costs" in report:
            c = report["pipeline_costs"]
            lines.append(f"  pipelined stack: {c['stack_flops_executed'] / 1e15:.1f} PFLOP executed per device "
                         f"({c['stack_flops_useful'] / 1e15:.1f} useful, bubble {c['bubble_flops'] / 1e15:.1f}, stage "
                         f"remat {c['stage_remat_flops'] / 1e15:.1f}); outside it {c['outer_flops'] / 1e15:.1f}")
            gb = lambda k: f"{c[k] / 1e9:.1f}"  # noqa: E731
            lines.append(f"  comm: intra-node {c['comm_ici_s']:.2f} s, inter-node {c['comm_dcn_s']:.2f} s — stage "
                         f"sends {gb('stage_send_bytes')} GB ({'inter' if c['stage_sends_cross_nodes'] else 'intra'}), "
                         f"FSDP gathers + grad reductions ({c['gather_passes']} / {c['grad_reduction_passes']} "
                         f"unit passes) {gb('fsdp_and_grad_ici_bytes')} GB intra / "
                         f"{gb('fsdp_and_grad_dcn_bytes')} GB inter, "
                         f"token collectives (expert all-to-all) {gb('token_ici_bytes')} GB intra / "
                         f"{c['token_dcn_bytes'] / 1e9:.1f} GB inter, outside the stack "
                         f"{c['outer_ici_bytes'] / 1e9:.1f} / {c['outer_dcn_bytes'] / 1e9:.1f} GB, optimizer once "
                         f"{c['optimizer_extra_ici_bytes'] / 1e9:.1f} / {c['optimizer_extra_dcn_bytes'] / 1e9:.1f} GB")
        for k, v in sorted(report["collectives_per_unit"].items()):
            lines.append(f"  per layer unit: {v['count']:3d} × {k:<18} {v['wire_bytes'] / 1e6:10.1f} MB on the wire")
    if "rollout" in report:
        lines.append(_rollout_human(report["rollout"]))
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    """The CLI's flags. `prog` keeps the usage line of the single-module planner (composer2_jax/plan.py)."""
    ap = argparse.ArgumentParser(prog="plan.py", description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="kimi_k2_5")
    ap.add_argument("--stage", default="cpt_bulk", choices=sorted(STAGES))
    ap.add_argument("--mesh", default="", help="stage=..,data=..,fsdp=..,expert=..,tensor=..,context=..")
    ap.add_argument("--memory_only", action="store_true",
                    help="compile for memory (and the pipeline bubble) only: no roofline")
    ap.add_argument("--chip", default="h200")
    ap.add_argument("--batch", type=int, default=None, help="global batch in sequences (default: one per DP shard)")
    ap.add_argument("--seq_len", type=int, default=None)
    ap.add_argument("--optimizer", default="muon", choices=["muon", "adamw"])
    ap.add_argument("--grad_accum", type=int, default=1,
                    help="micro-batches of --batch per step in the memory compile (gradients accumulated, as a stage "
                         "with step.grad_accum does); the roofline stays per micro-batch")
    ap.add_argument("--moe_impl", default="capacity", choices=["capacity", "dropless"],
                    help="capacity (factor 1.25, bounded buffers) | dropless (EP receive buffers sized for the worst "
                         "case)")
    ap.add_argument("--microbatches", type=int, default=0, help="pipeline microbatches (0: one per stage)")
    ap.add_argument("--repeats", type=int, default=1, help="pipeline virtual stages per stage (circular schedule)")
    ap.add_argument("--gather_params", action="store_true",
                    help="pipeline: gather a stage's parameters once per step (model.pipeline_gather_params)")
    ap.add_argument("--matmul_precision", default="bf16", choices=["bf16", "fp8"],
                    help="model.matmul_precision: fp8 = block-scaled FP8 FFN matmuls at the chip's FP8 peak")
    ap.add_argument("--moe_overlap_chunks", type=int, default=1,
                    help="model.moe_overlap_chunks: MoE tokens in C software-pipelined chunks; the report gains the "
                         "expert all-to-all time hidden under expert compute (a2a_hidden_s)")
    ap.add_argument("--search", type=int, default=0, help="chip count: propose the fastest fitting mesh")
    ap.add_argument("--search_stages", default="1",
                    help="pipeline stage counts --search includes, e.g. 1,2,4 (pipelined compiles are slow)")
    ap.add_argument("--search_execution", action="store_true",
                    help="with --mesh: search remat policy × expert capacity factor × causal block skipping")
    ap.add_argument("--search_schedule", action="store_true",
                    help="with a pipelined --mesh: search virtual stages R × microbatches M (plan/schedule.py)")
    ap.add_argument("--repeats_options", default="",
                    help="R values --search_schedule tries, e.g. 1,3,5 (default: divisors of the units per stage)")
    ap.add_argument("--microbatch_options", default="",
                    help="M values --search_schedule tries, e.g. 4,8 (default: every M >= stage the batch allows)")
    ap.add_argument("--remat", default=",".join(EXECUTION_REMATS), help="remat policies --search_execution tries")
    ap.add_argument("--capacity", default=",".join(map(str, EXECUTION_CAPACITIES)),
                    help="expert capacity factors --search_execution tries")
    ap.add_argument("--causal_skip", default="0,1", help="causal block skipping off/on values it tries (0,1)")
    ap.add_argument("--execution", default="",
                    help="one plan's execution as remat,capacity,skip (e.g. save_attention_out,1.0,1); default: "
                         "full remat, capacity 1.25, no causal skipping")
    ap.add_argument("--validate", action="store_true",
                    help="check the roofline against published MaxText step times (REFERENCES); one JSON line each")
    ap.add_argument("--json", action="store_true", help="print the JSON report instead of the table")
    rl = ap.add_argument_group("rl: the rollout side and the pod split (composer2_jax/plan/rollout.py)")
    rl.add_argument("--pod", type=int, default=0,
                    help="chips to split between trainer and engines (default: the mesh's)")
    rl.add_argument("--engine_chips", type=int, default=32, help="chips per rollout engine")
    rl.add_argument("--weight_bytes", type=float, default=1.0, help="engine bytes per weight (1 = fp8, 2 = bf16)")
    rl.add_argument("--generated_tokens", type=int, default=16384, help="mean sampled tokens per episode")
    rl.add_argument("--staleness", type=int, default=1, help="η: versions a sample may lag (0 = synchronous)")
    rl.add_argument("--train_step_s", type=float, default=None,
                    help="the trainer's step time on --train_chips for --batch episodes: plan the rollout side only")
    rl.add_argument("--train_chips", type=int, default=0)
    return ap


def _device_count(a) -> int:
    """Devices the run needs: the references' shared count for --validate, else --search N or the mesh's."""
    if a.validate:
        meshes = {_mesh_devices(r.mesh) for r in REFERENCES}  # (parse_mesh would import jax before XLA_FLAGS)
        if len(meshes) != 1:
            raise ValueError(f"--validate needs the references to share one device count, got {sorted(meshes)}")
        return meshes.pop()
    return a.search or _mesh_devices(a.mesh)


def _simulate_devices(n: int):
    """Have the host CPU platform simulate exactly n devices (only before jax is first imported)."""
    if "jax" not in sys.modules:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_force_host_platform_device_count={n}").strip()
        os.environ["JAX_PLATFORMS"] = "cpu"


def main(argv=None):
    """`python -m composer2_jax.plan`: parse the flags, simulate the devices, plan and print (module docstring)."""
    ap = _parser()
    a = ap.parse_args(argv)
    if a.stage == "rl" and a.train_step_s is not None:
        if not (a.train_chips and a.batch):
            ap.error("--train_step_s needs --train_chips and --batch (the step it was measured or planned for)")
        out = _rollout_plan(a, a.train_step_s, a.train_chips, a.batch)
        print(json.dumps(out, indent=1, default=str) if a.json else _rollout_human(out))
        return out
    if not a.mesh and not a.search and not a.validate:
        ap.error("give --mesh, --search N or --validate")
    _simulate_devices(_device_count(a))
    return _plan_and_print(ap, a)


def _plan_and_print(ap, a):
    """What `main` runs once the simulated devices are set: --validate, --search_execution, --search or one plan.

    The planner's compiling modules are imported here, not at module level: they import jax, which must not be
    imported before `_simulate_devices` has set XLA_FLAGS and JAX_PLATFORMS for the mesh's device count."""
    from composer2_jax.plan import report, search
    from composer2_jax.plan.step import parse_mesh

    if a.grad_accum != 1 and (a.validate or a.search_execution or a.search_schedule or a.search):
        ap.error(f"--grad_accum={a.grad_accum} applies to one plan (--mesh); --validate and the searches compile "
                 "one micro-batch")
    if a.validate:
        rows = report.validate()
        for row in rows:
            print(json.dumps(row), flush=True)
        return rows
    if a.search_execution:
        if not a.mesh:
            ap.error("--search_execution needs --mesh")
        out = search.search_execution(search.ExecutionSearch(
            a.preset, a.stage, parse_mesh(a.mesh), a.chip, a.batch, a.seq_len, a.optimizer,
            remats=tuple(x for x in a.remat.split(",") if x),
            capacities=tuple(float(x) for x in a.capacity.split(",") if x),
            skips=tuple(bool(int(x)) for x in a.causal_skip.split(",") if x)))
        print(json.dumps(out, indent=1, default=str) if a.json else _execution_human(out))
        return out
    if a.search_schedule:
        return _search_schedule(ap, a, parse_mesh)
    if a.search:
        out = search.search(a.preset, a.stage, a.search, a.chip, a.optimizer, seq_len=a.seq_len,
                            stages=tuple(int(x) for x in a.search_stages.split(",") if x))
        print(json.dumps(out, indent=1, default=str) if a.json or out["best"] is None else _human(out["best"]))
        return out
    rep = report.plan(a.preset, a.stage, parse_mesh(a.mesh), a.chip, report.PlanOptions(
        batch=a.batch, seq_len=a.seq_len, optimizer=a.optimizer, estimate=not a.memory_only, moe_impl=a.moe_impl,
        grad_accum=a.grad_accum,
        microbatches=a.microbatches, repeats=a.repeats, gather_params=a.gather_params,
        moe_overlap_chunks=a.moe_overlap_chunks, execution=parse_execution(a.execution) if a.execution else None,
        matmul_precision=a.matmul_precision))
    if a.stage == "rl" and "roofline" in rep:
        rep["rollout"] = _rollout_plan(a, rep["roofline"]["step_calibrated_s"], rep["chips"], rep["global_batch"])
    print(json.dumps(rep, indent=1, default=str) if a.json else _human(rep))
    return rep


def _search_schedule(ap, a, parse_mesh):
    """--search_schedule: the fastest fitting (R, M) on the pipelined --mesh (plan/schedule.py), as JSON."""
    from composer2_jax.plan.schedule import ScheduleSearch, search_schedule

    if not a.mesh or parse_mesh(a.mesh).get("stage", 1) < 2:
        ap.error("--search_schedule needs a pipelined --mesh (stage >= 2)")
    ints = lambda text: tuple(int(x) for x in text.split(",") if x) or None  # noqa: E731
    out = search_schedule(ScheduleSearch(
        a.preset, a.stage, parse_mesh(a.mesh), a.chip, a.batch, a.seq_len, a.optimizer, ints(a.repeats_options),
        ints(a.microbatch_options), parse_execution(a.execution) if a.execution else None))
    print(json.dumps(out, indent=1, default=str))
    return out


def _rollout_plan(a, train_step_s: float, train_chips: int, samples: int) -> dict:
    """The rollout side of an RL plan for the CLI's arguments (composer2_jax/plan/rollout.py). Imported here: the
    rollout module imports jax, and the rollout-only path (--train_step_s) needs no simulated devices."""
    from composer2_jax.plan import rollout as pr

    cfg, seq = _stage_config(a.preset, "rl")
    setup = pr.RolloutSetup(engine_chips=a.engine_chips, context=a.seq_len or seq, weight_bytes=a.weight_bytes)
    work = pr.Workload(samples=samples, generated_tokens=a.generated_tokens, train_step_s=train_step_s,
                       train_chips=train_chips, staleness=a.staleness)
    out = pr.split_pod(cfg, chips.get_chip(a.chip), setup, work, a.pod or train_chips)
    out["setup"] = dataclasses.asdict(setup)
    return out


def _rollout_human(out: dict) -> str:
    """The rollout side as text (`rollout.human`; imported here for the reason `_rollout_plan` gives)."""
    from composer2_jax.plan import rollout as pr

    return pr.human(out)
