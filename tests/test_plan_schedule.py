"""The planner's pipeline schedule search (plan/schedule.py) on the toy and the 8-device CPU mesh: every
(R, M) candidate's bubble, bubble FLOPs and parameter regroup follow its schedule; the best candidate was
compiled whole, its peak memory read from the compiled step and its schedule loops' trip count equal to the tick
count the bubble is computed from."""

import pytest

from composer2_jax import sharding as shd
from composer2_jax.model.pipeline import bubble_fraction
from composer2_jax.model_config import get_model_config
from composer2_jax.plan import schedule
from composer2_jax.plan.hlo import schedule_trip_counts

MESH = dict(data=1, stage=2, fsdp=2, expert=2, tensor=1, context=1)


@pytest.mark.slow  # 2 cost compiles and >= 1 whole pipelined step on the toy: minutes on the loaded 2 cores
def test_schedule_search_counts_each_candidates_bubble_and_compiles_the_best(monkeypatch):
    toy = get_model_config("toy", num_layers=5)  # 1 dense layer + 4 scanned units: R in {1, 2} at stage=2
    monkeypatch.setattr(schedule, "_stage_config", lambda preset, stage: (toy, 64))
    out = schedule.search_schedule(schedule.ScheduleSearch(
        "toy", "cpt_bulk", MESH, "h200", batch=16, seq_len=64, optimizer="adamw", repeats=(1, 2),
        microbatches=(2, 4)))
    rows = out["candidates"]
    assert sorted((r["repeats"], r["microbatches"]) for r in rows) == [(1, 2), (1, 4), (2, 2), (2, 4)]
    for r in rows:
        assert r["ticks"] == r["microbatches"] * r["repeats"] + 1
        assert r["bubble"] == pytest.approx(bubble_fraction(2, r["microbatches"], r["repeats"]))
        assert r["bubble_flops"] == pytest.approx(r["stack_flops_useful"] / (r["microbatches"] * r["repeats"]))
        assert (r["param_regroup_bytes"] > 0) == (r["repeats"] > 1)
    assert [r["tokens_per_s_calibrated"] for r in rows] == sorted((r["tokens_per_s_calibrated"] for r in rows),
                                                                  reverse=True)
    best = out["best"]
    assert best is not None and best["fits_calibrated"] and best["peak_bytes"] > 0
    assert best["compiled_trips"] == [best["ticks"], best["ticks"]]
    assert best["compiled_bubble"] == pytest.approx(best["bubble"])
    assert best["report"]["pipeline_costs"]["bubble_flops"] == best["bubble_flops"]
    assert out["search"]["memory_compiles"] >= 1


def test_schedule_candidates_follow_the_units_and_the_batch():
    mesh = shd.make_mesh(dict(stage=2, fsdp=2, expert=2))
    cfg = get_model_config("toy", num_layers=9)  # 8 scanned units: 4 per stage, R in {1, 2, 4}
    pairs = schedule.schedule_candidates(cfg, mesh, 32)  # microbatches split over fsdp×expert = 4: M | 8
    assert pairs == [(r, m) for r in (1, 2, 4) for m in (2, 4, 8)]
    with pytest.raises(ValueError, match=r"pipeline repeats \[3\] do not divide the 4 units per stage"):
        schedule.schedule_candidates(cfg, mesh, 32, repeats=(3,))


def test_schedule_loop_trip_counts_are_read_from_the_hlo():
    fwd = ('  %while.1 = (s32[]) while(%t), condition=%c, body=%b, metadata={op_name="jit(step)/jvp(Transformer)/'
           '_pipelined_stack/while"}, backend_config={"known_trip_count":{"n":"23"}}')
    inner = ('  %while.2 = (s32[]) while(%t), condition=%c, body=%b, metadata={op_name="jit(step)/_pipelined_stack/'
             'while/body/scan/while"}, backend_config={"known_trip_count":{"n":"3"}}')
    bwd = fwd.replace("while.1", "while.3").replace("jvp(Transformer)", "transpose(jvp(Transformer))")
    assert schedule_trip_counts("\n".join([fwd, inner, bwd])) == [23, 23]
    with pytest.raises(ValueError, match=r"schedule loop %while.1 has no known_trip_count"):
        schedule_trip_counts(fwd.split(", backend_config")[0])
