"""The scale planner on small presets and the 8-device CPU mesh: its per-device bytes equal what a real run
allocates; bad meshes are clear errors; the roofline report is complete."""

import dataclasses
import json
import math
import os
import subprocess
import sys

import jax
import pytest

from composer2_jax import sharding as shd
from composer2_jax.model import Transformer
from composer2_jax.model_config import get_model_config
from composer2_jax.plan import calibration, hlo, report, roofline, stage, step
from composer2_jax.plan import search as plan_search
from composer2_jax.train import optim
from composer2_jax.train.state import init_train_state
from tests.tolerances import PLANNER_FLOP_COUNT_RTOL

MESH = dict(data=1, fsdp=4, expert=2, tensor=1, context=1)


def _device0_bytes(tree) -> int:
    dev = jax.devices()[0]
    return sum(s.data.nbytes for leaf in jax.tree.leaves(tree) for s in leaf.addressable_shards if s.device == dev)


def test_reported_bytes_equal_a_real_run_on_the_cpu_mesh():
    rep = report.plan("toy", "cpt_bulk", MESH, "h200",
                      report.PlanOptions(seq_len=64, optimizer="adamw", estimate=False))
    cfg = get_model_config("toy")
    oc = optim.OptimConfig(name="adamw")
    state, _, _ = init_train_state(Transformer(cfg), lambda p, n: optim.make_optimizer(oc, p, n),
                                   shd.make_mesh(MESH), jax.random.key(0), (rep["global_batch"], 64))
    assert rep["per_device"]["params_bytes"] == _device0_bytes(state.params)
    assert rep["per_device"]["optimizer_bytes"] == _device0_bytes(state.opt_state)
    assert rep["fits"] and rep["per_device"]["peak_bytes"] >= rep["per_device"]["params_bytes"]


def test_roofline_report_has_positive_terms_and_collectives():
    rep = report.plan("toy", "cpt_bulk", dict(MESH, fsdp=8, expert=1), "v5p",
                      report.PlanOptions(seq_len=64, optimizer="adamw"))
    r = rep["roofline"]
    assert r["compute_s"] > 0 and r["memory_s"] > 0 and r["step_s"] >= max(r["compute_s"], r["memory_s"])
    assert rep["compiled_flops_per_device"] > 0 and 0 < rep["est_mfu"] < 1
    assert "all-gather" in rep["collectives_per_unit"] or "all-reduce" in rep["collectives_per_unit"]


def test_pipelined_mesh_plans_memory_the_bubble_and_the_roofline():
    """stage=2 over the toy's 2 scanned units: the schedule and its bubble, memory, and a roofline whose stack
    work is (M·R + S − 1)/(M·R) of the useful work."""
    mesh = dict(MESH, stage=2, fsdp=2, expert=2)
    rep = report.plan("toy", "cpt_bulk", mesh, "h200",
                      report.PlanOptions(seq_len=64, optimizer="adamw", microbatches=4))
    assert rep["pipeline"] == dict(stages=2, microbatches=4, repeats=1, units_per_stage=1, bubble=1 / 5, ticks=5,
                                   compiled_trips=[5, 5], gather_params=False)  # trips: the compiled loops
    assert rep["global_batch"] == 4 * 4 and rep["per_device"]["peak_bytes"] > 0  # 4 data-parallel shards × M
    c, r = rep["pipeline_costs"], rep["roofline"]
    assert c["bubble_flops"] == pytest.approx(c["stack_flops_useful"] * (2 - 1) / 4)
    # the toy has remat_policy="none": no stage-step checkpoint, so no recompute on top
    assert c["stage_remat_flops"] == 0
    assert c["stack_flops_executed"] == pytest.approx(c["stack_flops_useful"] + c["bubble_flops"])
    assert c["outer_flops"] > 0 and c["stage_send_bytes"] > 0 and c["optimizer_extra_flops"] == 0
    assert r["step_s"] >= max(r["compute_s"], r["memory_s"]) > 0 and 0 < rep["est_mfu"] < 1
    assert rep["executed_over_useful_flops"] > 1


def test_pipelined_mesh_with_ring_attention_inside_a_stage():
    """cpt_long's shape pipelined: context parallelism (the ring) inside each stage. The ring's shard_map specs
    follow the stage body's rules (no `stage`: the stage vmap owns that axis); until 2026-12-03 they came from the
    global table, whose batch split over stage × data × fsdp × expert (here 4) does not divide a microbatch of 2
    (kimi_k2_5 cpt_long at stage=4, expert=8, context=8: 32 against 8), and the plan failed. The stage sends are
    [mb, T, D] bf16 split over the stage's data × fsdp × expert AND its `context` devices."""
    mesh = dict(MESH, stage=2, fsdp=1, expert=2, context=2)
    seq = 64
    rep = report.plan("toy", "cpt_long", mesh, "h200", report.PlanOptions(seq_len=seq, optimizer="adamw"))
    assert rep["pipeline"]["stages"] == 2 and rep["pipeline"]["microbatches"] == 2
    assert rep["global_batch"] == 4 and rep["per_device"]["peak_bytes"] > 0  # 2 batch shards in a stage × M
    c, d = rep["pipeline_costs"], get_model_config("toy").hidden_size
    mb, iterations, split = 2, 2 * 1 + 2 - 1, 2 * 2  # M·R + S − 1 iterations; expert × context devices per stage
    assert c["stage_send_bytes"] == pytest.approx(2 * iterations * mb * seq * d * 2 / split
                                                  + 2 * 2 * (4 // 2) * seq * d * 2 / split)
    assert c["bubble_flops"] == pytest.approx(c["stack_flops_useful"] * (2 - 1) / 2)
    assert rep["roofline"]["compute_s"] > 0 and 0 < rep["est_mfu"] < 1


def test_gathered_stage_parameters_are_counted_once_per_step():
    """model.pipeline_gather_params on a stage without tensor or context split: the schedule runs per shard
    (model/pipeline.py `_run_per_shard`), so a stage's FSDP weight all-gathers run once per step for its R·L units
    before the schedule loop, and their gradients are reduced once per step after the backward loop, instead of
    both at each of the (M·R + S − 1)·L unit passes: both byte counts are R / (M·R + S − 1) of the per-iteration
    figure (here 1/5: S = 2, M = 4, R = 1; tests/test_pipeline_parallel.py counts 0 gradient reductions inside
    the compiled loops); token collectives and FLOPs do not change; the gathered copy shows in the compiled
    memory."""
    mesh = dict(MESH, stage=2, fsdp=2, expert=2)
    kw = dict(seq_len=64, optimizer="adamw", microbatches=4)
    off = report.plan("toy", "cpt_bulk", mesh, "h200", report.PlanOptions(**kw))
    on = report.plan("toy", "cpt_bulk", mesh, "h200", report.PlanOptions(gather_params=True, **kw))
    assert on["pipeline"]["gather_params"] and not off["pipeline"]["gather_params"]
    c_on, c_off = on["pipeline_costs"], off["pipeline_costs"]
    s_, m_, r_ = 2, 4, 1
    once = r_ / (m_ * r_ + s_ - 1)
    assert (c_off["gather_passes"], c_off["grad_reduction_passes"]) == (5, 5)
    assert (c_on["gather_passes"], c_on["grad_reduction_passes"]) == (1, 1)
    assert c_off["fsdp_gather_ici_bytes"] > 0
    assert c_off["fsdp_and_grad_ici_bytes"] > c_off["fsdp_gather_ici_bytes"]  # gradient reductions are counted too
    for link in ("ici", "dcn"):
        gathers_off = c_off[f"fsdp_gather_{link}_bytes"]
        assert c_on[f"fsdp_gather_{link}_bytes"] == pytest.approx(gathers_off * once)
        grads_on = c_on[f"fsdp_and_grad_{link}_bytes"] - c_on[f"fsdp_gather_{link}_bytes"]
        grads_off = c_off[f"fsdp_and_grad_{link}_bytes"] - c_off[f"fsdp_gather_{link}_bytes"]
        assert grads_on == pytest.approx(grads_off * once)
        assert c_on[f"fsdp_and_grad_{link}_bytes"] == pytest.approx(c_off[f"fsdp_and_grad_{link}_bytes"] * once)
    for k in ("token_ici_bytes", "token_dcn_bytes", "stack_flops_executed", "stage_send_bytes"):
        assert c_on[k] == pytest.approx(c_off[k])
    saved = c_off["fsdp_and_grad_ici_bytes"] - c_on["fsdp_and_grad_ici_bytes"]
    assert on["ici_bytes_per_device"] == pytest.approx(off["ici_bytes_per_device"] - saved)
    assert on["per_device"]["peak_bytes"] > off["per_device"]["peak_bytes"]


@pytest.mark.parametrize("gather, mesh, expected", [
    (False, dict(stage=4, fsdp=8, expert=8), (4 * 1 + 3) * 2),  # GSPMD: both inside the loop, every pass
    (True, dict(stage=4, fsdp=8, expert=8), (1 * 2, 1 * 2)),  # per shard: both once per step, R·L
    (True, dict(stage=4, fsdp=1, expert=8, context=8), (1 * 2, (4 * 1 + 3) * 2)),  # GSPMD gathered: grads inside
    (True, dict(stage=4, fsdp=4, expert=8, tensor=2), (1 * 2, (4 * 1 + 3) * 2)),
])
def test_parameter_collective_passes_follow_the_compiled_schedule(gather, mesh, expected):
    """`param_collective_passes` counts what model/pipeline.py runs: (weight gathers, gradient reductions) per step
    in one-unit passes, for S = 4, M = 4, R = 1, L = 2 ((M·R + S − 1)·L = 14 passes; R·L = 2 once per step). The
    per-shard schedule is chosen by the model's own `runs_per_shard` (tensor = context = 1)."""
    from composer2_jax.model.pipeline import PipelineSpec, runs_per_shard

    cfg = get_model_config("toy", pipeline_gather_params=gather)
    spec = PipelineSpec(stages=4, repeats=1, microbatches=4, units_per_stage=2)
    expected = expected if isinstance(expected, tuple) else (expected, expected)
    assert roofline.param_collective_passes(cfg, mesh, spec) == expected
    assert runs_per_shard(cfg, mesh) == (gather and expected[1] == 2)


def test_bad_meshes_are_clear_errors():
    with pytest.raises(ValueError, match=r"needs 16 devices; this process has 8"):
        report.plan("toy", "cpt_bulk", dict(MESH, fsdp=8), "h200", report.PlanOptions(seq_len=64, estimate=False))
    with pytest.raises(ValueError, match=r"num_heads=4 is not divisible by mesh axes tensor=8"):
        report.plan("toy", "cpt_bulk", dict(MESH, fsdp=1, expert=1, tensor=8), "h200",
                    report.PlanOptions(seq_len=64, estimate=False))
    with pytest.raises(ValueError, match=r"unknown mesh axis 'pipeline'"):
        step.parse_mesh("data=2,pipeline=4")
    with pytest.raises(ValueError, match=r"unknown chip 'tpu9'"):
        report.plan("toy", "cpt_bulk", MESH, "tpu9", report.PlanOptions(estimate=False))


def test_collective_parser_reads_groups_and_bytes():
    line = ("%all-gather.3 = bf16[8,1024]{1,0} all-gather(bf16[1,1024]{1,0} %p), channel_id=1, "
            "replica_groups=[2,8]<=[16], dimensions={0}")
    (c,) = hlo.collectives(line, node_size=8)
    assert c.kind == "all-gather" and c.bytes == 8 * 1024 * 2 and c.group == 8 and not c.crosses_nodes
    line2 = "%ar = f32[4]{0} all-reduce(f32[4]{0} %x), replica_groups={{0,8},{1,9}}, to_apply=%add"
    (c2,) = hlo.collectives(line2, node_size=8)
    assert c2.crosses_nodes and c2.wire_bytes == pytest.approx(2 * 0.5 * 16)


def test_validate_compares_the_roofline_with_a_reference_step_time():
    ref = calibration.Reference("toy on 8 CPU devices", "toy", "h200", "data=1,fsdp=8", 8, 64, step_s=0.5, mfu=0.4,
                                source="made up for the test")
    (row,) = report.validate((ref,))
    assert row["measured_step_s"] == 0.5 and row["est_step_s"] > 0
    assert row["ratio_est_over_measured"] == pytest.approx(row["est_step_s"] / 0.5, rel=1e-2)
    assert row["est_step_s"] >= max(row["est_compute_s"], row["est_memory_s"])


def test_published_references_are_buildable_stand_ins():
    from flax import linen as nn

    from composer2_jax.params import count_params

    published = {"llama2_70b_mla": (68.98e9, 68.98e9), "mixtral_8x7b_mla": (46.70e9, 12.88e9)}  # total, active
    for ref in calibration.REFERENCES:
        cfg = get_model_config(ref.preset)
        boxed = jax.eval_shape(lambda c=cfg: Transformer(c).init(jax.random.key(0), jax.numpy.zeros((1, 8), "int32")))
        total, active = count_params(nn.unbox(boxed)["params"], cfg)
        want_total, want_active = published[ref.preset]
        assert abs(total / want_total - 1) < 0.03 and abs(active / want_active - 1) < 0.03, (ref.preset, total, active)
        assert ref.global_batch % math.prod(step.parse_mesh(ref.mesh).values()) == 0


def test_search_ranks_fitting_meshes_by_tokens_per_second(monkeypatch):
    out = plan_search.search("toy", "cpt_bulk", 8, "h200", optimizer="adamw", limit=2, seq_len=64)
    assert out["best"] is not None and out["best"]["fits"] and len(out["ranked"]) == 2
    assert out["ranked"][0]["tokens_per_s"] >= out["ranked"][1]["tokens_per_s"]
    assert out["best"]["mesh"] == out["ranked"][0]["mesh"] and math.prod(out["best"]["mesh"].values()) == 8
    from composer2_jax import chips

    tiny = dataclasses.replace(chips.CHIPS["h200"], name="tiny", hbm_bytes=1e3)
    monkeypatch.setitem(chips.CHIPS, "tiny", tiny)
    none = plan_search.search("toy", "cpt_bulk", 8, "tiny", optimizer="adamw", limit=1, seq_len=64)
    assert none["best"] is None and "fits tiny HBM" in none["reason"] and not any(t["fits"] for t in none["tried"])


@pytest.mark.slow
def test_pipelined_kimi_k2_5_cpt_bulk_fits_an_h200():
    """The full kimi_k2_5 train step, stage=4 × fsdp=8 × expert=8 on 256 simulated devices (the CLI, ~10 min of
    CPU compile): calibrated peak memory per device within the H200's HBM. Before the stage-consistent MoE layout, the
    stage-step checkpoint, the batch split over `stage` and batch-split loss chunks, this compiled to 1,382 GB
    (docs/scaling.md)."""
    cmd = [sys.executable, "-m", "composer2_jax.plan", "--preset", "kimi_k2_5", "--stage", "cpt_bulk", "--mesh",
           "stage=4,fsdp=8,expert=8", "--chip", "h200", "--memory_only", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    rep = json.loads(out.stdout[out.stdout.index("{"):])
    assert rep["pipeline"]["stages"] == 4 and rep["global_batch"] == 256
    peak = rep["per_device"]["peak_bytes"]
    # the planner's fit criterion for every kimi plan in docs/scaling.md: the CPU peak over CPU_MEMORY_OVERESTIMATE
    assert rep["fits_calibrated"], f"peak {peak / 1e9:.1f} GB / {calibration.CPU_MEMORY_OVERESTIMATE} > HBM"
    assert peak < 250e9, f"peak {peak / 1e9:.1f} GB: 228 GB on 2026-12-02"


def test_execution_applies_remat_capacity_and_causal_skip_and_refuses_pipelined_meshes():
    cfg = stage._stage_config("toy", "cpt_bulk")[0]
    ex = stage.Execution("dots_no_batch", 1.0, True).apply(cfg)
    assert (ex.remat_policy, ex.moe_capacity_factor, ex.attention_kernel) == ("dots_no_batch", 1.0, "xla_causal_skip")
    assert stage.Execution("full", 1.25, False).apply(ex).attention_kernel == "xla_chunked"
    ring = dataclasses.replace(cfg, attention_kernel="ring")
    assert stage.Execution("full", 1.25, True).apply(ring).attention_kernel == "ring"  # never replaces the ring
    with pytest.raises(ValueError, match="unpipelined meshes"):
        plan_search.search_execution(plan_search.ExecutionSearch("toy", "cpt_bulk", dict(MESH, stage=2, fsdp=2), "h200",
                                                                   seq_len=64))


@pytest.mark.slow  # 10 toy compiles: ~15 min on the loaded shared 2 cores
def test_execution_search_adds_causal_skip_as_a_direct_compile_would():
    """The search compiles the skipping model's unit costs at the largest capacity factor only and adds their
    difference at the others; at factor 1.0 that equals the unrolled unit compiles of the skipping model itself
    (the FLOP-count tolerance of the counting mode), and skipping lowers executed / useful FLOPs when T spans
    several chunks (T = 1024: 3 of 4 blocks)."""
    seq = 1024
    out = plan_search.search_execution(plan_search.ExecutionSearch(
        "toy", "cpt_bulk", MESH, "h200", seq_len=seq, optimizer="adamw", remats=("full",), capacities=(1.0, 1.25),
        skips=(False, True)))
    assert out["search"]["memory_compiles"] == 2 and out["search"]["cost_compiles"] == 6
    rows = {(row["execution"]["capacity_factor"], row["execution"]["causal_skip"]): row for row in out["candidates"]}
    cfg = stage.Execution("full", 1.0, True).apply(stage._stage_config("toy", "cpt_bulk")[0])
    base, delta, n_units, _ = step._unit_costs(cfg, shd.make_mesh(MESH), out["global_batch"], seq, "adamw", 8)
    direct = base["flops"] + (n_units - 1) * delta["flops"]
    assert rows[(1.0, True)]["compiled_flops_per_device"] == pytest.approx(direct, rel=PLANNER_FLOP_COUNT_RTOL)
    for cap in (1.0, 1.25):
        assert rows[(cap, True)]["executed_over_useful_flops"] < rows[(cap, False)]["executed_over_useful_flops"]
    assert rows[(1.0, False)]["compiled_flops_per_device"] < rows[(1.25, False)]["compiled_flops_per_device"]
    assert out["best"] is out["candidates"][0] and out["best"]["fits_calibrated"]


def test_moe_overlap_rule_on_hand_computed_numbers():
    """model.moe_overlap_chunks = C: per chunk a = a2a/C, f = expert/C; chunk i's FFN overlaps chunk i+1's dispatch
    and chunk i−1's combine (a/2 each), the first dispatch and the last combine stay exposed:
    hidden = Σ_i min(f, comm_i), comm = a/2·[i > 0] + a/2·[i < C − 1]."""
    o = roofline.moe_overlap_hidden(4.0, 6.0, 2)  # a = 2, f = 3, comm = [1, 1]: hidden 2 = half of the a2a
    assert o["a2a_hidden_s"] == pytest.approx(2.0) and o["a2a_exposed_s"] == pytest.approx(2.0)
    assert o["moe_serial_s"] == pytest.approx(10.0) and o["moe_overlapped_s"] == pytest.approx(8.0)
    o = roofline.moe_overlap_hidden(8.0, 40.0, 4)  # a = 2, f = 10, comm = [1, 2, 2, 1]: all but 1/C hidden
    assert o["a2a_hidden_s"] == pytest.approx(6.0)
    o = roofline.moe_overlap_hidden(8.0, 2.0, 4)  # f = 0.5 < every comm_i: the compute available bounds it
    assert o["a2a_hidden_s"] == pytest.approx(2.0) and o["moe_overlapped_s"] == pytest.approx(8.0)
    assert roofline.moe_overlap_hidden(3.0, 5.0, 1)["a2a_hidden_s"] == 0.0  # one chunk: nothing to overlap
    with pytest.raises(ValueError, match=r"moe_overlap_chunks must be an int >= 1, got 0"):
        roofline.moe_overlap_hidden(1.0, 1.0, 0)
    # the toy's executed expert FLOPs per token and layer: k=2 × capacity 1.25 × 3 matmuls × 2·D·F × 3 passes
    toy = get_model_config("toy", moe_impl="capacity")
    assert roofline.expert_flops_per_token(toy) == 2 * 1.25 * 3 * 2 * 64 * 32 * 3


def test_overlap_report_reads_the_unit_all_to_all_and_the_expert_compute():
    """`_moe_overlap_report` on hand-made collectives (no compile): one unit's all-to-all = the 2-unit program's
    minus the 1-unit program's, split by link; expert compute = tokens per device × `expert_flops_per_token` /
    the `tensor` split of the expert width; then `moe_overlap_hidden`."""
    from composer2_jax import chips

    chip = chips.get_chip("h200")
    a2a = lambda b, cross=False: hlo.Collective("all-to-all", b, 2, cross)  # noqa: E731  wire = b/2
    other = hlo.Collective("all-gather", 10**9, 8, False)  # not an all-to-all: ignored
    one = [a2a(900e6), other]
    two = [a2a(900e6), a2a(900e6), a2a(100e6, cross=True), other]  # one unit: 450 MB inside, 50 MB across nodes
    cfg = get_model_config("toy", moe_impl="capacity", moe_overlap_chunks=2)
    mesh = shd.make_mesh(dict(MESH, tensor=2, fsdp=2))
    o = roofline._moe_overlap_report(cfg, one, two, 3, 4096, mesh, chip)
    a2a_s = 3 * (450e6 / chip.ici_bw + 50e6 / chip.dcn_bw)
    expert_s = 3 * 4096 * roofline.expert_flops_per_token(cfg) / 2 / chip.peak_bf16_flops
    assert o["a2a_s"] == pytest.approx(a2a_s) and o["expert_compute_s"] == pytest.approx(expert_s)
    assert o["a2a_hidden_s"] == pytest.approx(roofline.moe_overlap_hidden(a2a_s, expert_s, 2)["a2a_hidden_s"])


def test_grad_accum_compiles_the_accumulating_step_the_stage_ships():
    """--grad_accum: the memory compile takes grad_accum × batch sequences through the accumulation loop (the
    stage's program, train/step.py), so its peak is the accumulated step's, not one micro-batch's; the roofline's
    batch is unchanged."""
    opts = dict(seq_len=64, optimizer="adamw", estimate=False)
    one = report.plan("toy", "cpt_bulk", MESH, "h200", report.PlanOptions(**opts))
    two = report.plan("toy", "cpt_bulk", MESH, "h200", report.PlanOptions(grad_accum=2, **opts))
    assert (one["grad_accum"], two["grad_accum"]) == (1, 2)
    assert two["global_batch"] == one["global_batch"] and two["tokens_per_step"] == one["tokens_per_step"]
    per_one, per_two = one["per_device"], two["per_device"]
    assert per_two["params_bytes"] == per_one["params_bytes"]
    # at least the accumulator: one more fp32 gradient shard of the parameters
    assert per_two["peak_bytes"] >= per_one["peak_bytes"] + per_one["params_bytes"]
    compiled, _ = step.compile_train_step(get_model_config("toy"), shd.make_mesh(MESH), one["global_batch"], 64,
                                          "adamw", grad_accum=2)
    (_, batch_in), _ = compiled.args_info  # (state, batch) positional arguments
    assert batch_in["tokens"].shape == (2 * one["global_batch"], 64)
    with pytest.raises(ValueError, match="grad_accum=0"):
        report.plan("toy", "cpt_bulk", MESH, "h200", report.PlanOptions(grad_accum=0, **opts))
