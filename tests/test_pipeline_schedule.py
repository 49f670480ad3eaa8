"""The interleaved (circular) pipeline schedule at M > S microbatches (model/pipeline.py), on 8 fake CPU devices.

  * equivalence: one pipelined train step with v = 2 virtual stages per device and M = 8 microbatches equals the
    single-device step in loss, metrics, every gradient (params after SGD(lr 1) = params − gradients) and the MoE
    router-bias update (aux-loss-free balancing), at tests/tolerances.py SHARDED_FP32, for (S, v, M) = (2, 2, 8)
    and (4, 2, 8);
  * the schedule's tick table (`schedule_table`), enumerated independently of the bubble formula: every stage runs
    every (microbatch, virtual stage) item exactly once, after the item it depends on, and idles for exactly
    (S − 1) / (v·M + S − 1) of the ticks;
  * the compiled program: the schedule's forward and backward loops run `spec.iterations` trips each
    (plan/hlo.py `schedule_trip_counts`, read from the compiled HLO).
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from composer2_jax import sharding as shd
from composer2_jax.model import Transformer
from composer2_jax.model.pipeline import PipelineSpec, bubble_fraction, pipeline_spec, schedule_table
from composer2_jax.model_config import get_model_config
from composer2_jax.plan.hlo import schedule_trip_counts
from composer2_jax.train.state import activate, init_train_state
from composer2_jax.train.step import StepConfig, make_train_step
from tests.test_pipeline_parallel import _assert_same_step

T = 16


def _cfg(**kw):
    return get_model_config("toy", num_layers=9, **kw)  # 1 dense layer + 8 scanned MoE units


def _batch(b, seed=0):
    r = np.random.default_rng(seed)
    tok = r.integers(0, 512, (b, T + 1)).astype(np.int32)
    seg = np.ones((b, T), np.int32)
    seg[:, T // 2:] = 2  # two packed documents per row
    pos = np.concatenate([np.arange(T // 2), np.arange(T - T // 2)])
    return dict(tokens=tok[:, :-1], targets=tok[:, 1:], loss_mask=np.ones((b, T), np.int32), segment_ids=seg,
                positions=np.broadcast_to(pos, (b, T)).astype(np.int32))


def _run(cfg, mesh_shape, b):
    """Metrics, params and router state after one SGD(lr 1) train step on `mesh_shape` (None: one device), and
    the router state before it."""
    devices = jax.devices()[:1] if mesh_shape is None else None
    mesh = shd.make_mesh(mesh_shape or {"fsdp": 1}, devices=devices)
    model = Transformer(cfg, mesh)
    state, _, tx = init_train_state(model, lambda p, n: optax.sgd(1.0), mesh, jax.random.key(0), (b, T))
    before = jax.device_get(state.router_state)
    with activate(mesh):
        step = jax.jit(make_train_step(model, tx, StepConfig(loss_chunk=64)), donate_argnums=0)
        state, m = step(state, _batch(b))
    return jax.device_get(m), jax.device_get(state.params), jax.device_get(state.router_state), before


INTERLEAVED = [  # (mesh, model overrides, global batch): M = 8 microbatches, each split over the stage's devices
    pytest.param(dict(stage=2, fsdp=2, expert=2), dict(pipeline_repeats=2, pipeline_microbatches=8,
                                                       remat_policy="full"), 32, id="S2-v2-M8-fsdp-ep"),
    pytest.param(dict(stage=4, fsdp=2), dict(pipeline_repeats=2, pipeline_microbatches=8), 16, id="S4-v2-M8-fsdp",
                 marks=pytest.mark.slow),
]


@pytest.mark.parametrize("mesh_shape, overrides, b", INTERLEAVED)
def test_interleaved_schedule_at_m_above_s_matches_the_single_device_step(mesh_shape, overrides, b):
    cfg = _cfg(**overrides)
    spec = pipeline_spec(cfg, shd.make_mesh(mesh_shape), 8)
    assert spec.repeats == 2 and spec.microbatches == 8 and spec.microbatches > spec.stages
    ref, pp = _run(cfg, None, b), _run(cfg, mesh_shape, b)
    assert pp[0]["pipeline_bubble"] == pytest.approx(bubble_fraction(spec.stages, 8, 2))
    _assert_same_step(cfg, mesh_shape, ref[:3], pp[:3])  # loss, metrics, params − grads, router biases after
    moved = [not np.array_equal(after, before) for after, before in zip(jax.tree.leaves(ref[2]),
                                                                        jax.tree.leaves(ref[3]))]
    assert moved and all(moved), "a router bias did not move: the bias-update check would prove nothing"


@pytest.mark.parametrize("s, v, m", [(2, 2, 8), (4, 2, 8), (4, 1, 4), (4, 5, 4), (3, 4, 3), (8, 2, 32)])
def test_schedule_table_runs_every_item_once_in_dependency_order(s, v, m):
    spec = PipelineSpec(s, v, m, 1)
    table = schedule_table(spec)
    assert len(table) == spec.iterations and all(len(row) == s for row in table)
    when = {}
    for tick, row in enumerate(table):
        for stage, item in enumerate(row):
            if item is not None:
                assert (stage, item) not in when, f"stage {stage} ran {item} twice"
                when[(stage, item)] = tick
    assert set(when) == {(st, (mb, r)) for st in range(s) for mb in range(m) for r in range(v)}
    for (stage, (mb, r)), tick in when.items():
        if stage > 0:  # the previous stage finished this item on an earlier tick
            assert when[(stage - 1, (mb, r))] < tick
        elif r > 0:  # stage 0 takes the item back from the last stage's previous virtual stage
            assert when[(s - 1, (mb, r - 1))] < tick
    idle = sum(item is None for row in table for item in row) / (len(table) * s)
    assert idle == pytest.approx(bubble_fraction(s, m, v)) == pytest.approx(spec.bubble)


def test_bubble_falls_below_15_percent_with_virtual_stages():
    assert bubble_fraction(4, 4, 1) == pytest.approx(3 / 7)  # GPipe-like M = S: 42.9 %
    assert bubble_fraction(4, 4, 5) == pytest.approx(3 / 23) and 3 / 23 < 0.15  # v = 5 at the same M: 13.0 %
    assert bubble_fraction(4, 16, 1) == pytest.approx(3 / 19) and 3 / 19 > 0.15  # M = 4·S alone: 15.8 %
    assert bubble_fraction(4, 16, 2) == pytest.approx(3 / 35) and 3 / 35 < 0.15  # both: 8.6 %


@pytest.mark.slow  # one pipelined train-step compile: 6 min on the loaded shared 2 cores (2026-12-06)
def test_compiled_schedule_loops_run_the_tick_count():
    """The compiled step's schedule loops (forward, and the backward autodiff derives from it) each run
    M·v + S − 1 trips: the bubble the planner reports is the compiled program's, not only the formula's."""
    from composer2_jax.plan.step import compile_train_step

    cfg = _cfg(pipeline_repeats=2, pipeline_microbatches=4, remat_policy="full")
    mesh = shd.make_mesh(dict(stage=2, fsdp=4))
    compiled, _ = compile_train_step(cfg, mesh, 16, T, "adamw")
    trips = schedule_trip_counts(compiled.as_text())
    spec = pipeline_spec(cfg, mesh, 8)
    assert trips == [spec.iterations, spec.iterations], trips  # 4·2 + 1 = 9
    assert jnp.isclose(bubble_fraction(2, 4, 2), (spec.stages - 1) / trips[0])
