"""Pipeline parallelism (model/pipeline.py) on 8 fake CPU devices: the pipelined step ≡ the unpipelined one.

stage=2 and stage=4, with and without repeats (circular schedule), with fsdp / expert parallelism inside a stage,
remat and MTP on: loss, gradients and parameters after an update equal the single-device step's
(tests/tolerances.py SHARDED_FP32).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from composer2_jax import sharding as shd
from composer2_jax.config import get_model_config
from composer2_jax.model import Transformer
from composer2_jax.model.pipeline import bubble_fraction, from_stages, pipeline_spec, to_stages
from composer2_jax.train.state import activate, init_train_state
from composer2_jax.train.step import StepConfig, make_train_step
from tests.tolerances import SHARDED_FP32

B, T = 8, 16


def _cfg(**kw):
    return get_model_config("toy", num_layers=9, **kw)  # 1 dense layer + 8 scanned MoE units


def _batch(seed=0):
    r = np.random.default_rng(seed)
    tok = r.integers(0, 512, (B, T + 1)).astype(np.int32)
    seg = np.ones((B, T), np.int32)
    seg[:, T // 2:] = 2  # two packed documents per row
    pos = np.concatenate([np.arange(T // 2), np.arange(T - T // 2)])
    return dict(tokens=tok[:, :-1], targets=tok[:, 1:], loss_mask=np.ones((B, T), np.int32), segment_ids=seg,
                positions=np.broadcast_to(pos, (B, T)).astype(np.int32))


def _run(cfg, mesh_shape):
    """Metrics, params and router state after one train step on `mesh_shape` (None: one device).

    The optimizer is SGD with learning rate 1, so the params after the update are params − gradients: comparing
    them compares the gradients of the whole step (loss, MTP, balance loss) at the same tolerance."""
    devices = jax.devices()[:1] if mesh_shape is None else None
    mesh = shd.make_mesh(mesh_shape or {"fsdp": 1}, devices=devices)
    model = Transformer(cfg, mesh)
    state, _, tx = init_train_state(model, lambda p, n: optax.sgd(1.0), mesh, jax.random.key(0), (B, T))
    with activate(mesh):
        step = jax.jit(make_train_step(model, tx, StepConfig(loss_chunk=64)), donate_argnums=0)
        state, m = step(state, _batch())
    return jax.device_get(m), jax.device_get(state.params), jax.device_get(state.router_state)


CASES = [  # (mesh, model overrides); the first is the fast suite's proof, the rest run in CI's slow step
    pytest.param(dict(stage=2, fsdp=2, expert=2), dict(pipeline_repeats=2, remat_policy="full"), id="s2-fsdp-ep-r2"),
    pytest.param(dict(stage=4, expert=2), dict(pipeline_repeats=2, num_mtp_layers=1), id="s4-ep-r2-mtp",
                 marks=pytest.mark.slow),
    pytest.param(dict(stage=2, fsdp=4), {}, id="s2-fsdp", marks=pytest.mark.slow),
    pytest.param(dict(stage=4, fsdp=2), dict(pipeline_microbatches=4, remat_policy="dots"), id="s4-fsdp",
                 marks=pytest.mark.slow),
]


@pytest.mark.parametrize("mesh_shape, overrides", CASES)
def test_pipelined_step_matches_the_unpipelined_step(mesh_shape, overrides):
    cfg = _cfg(**overrides)
    ref_m, ref_p, ref_r = _run(cfg, None)
    pp_m, pp_p, pp_r = _run(cfg, mesh_shape)
    for key in ("loss", "ce", "grad_norm", "balance_loss", "moe_load") + (("mtp/loss",) if cfg.num_mtp_layers else ()):
        np.testing.assert_allclose(pp_m[key], ref_m[key], **SHARDED_FP32, err_msg=key)
    s = mesh_shape["stage"]
    assert pp_m["pipeline_bubble"] == pytest.approx(bubble_fraction(s, cfg.pipeline_microbatches or s,
                                                                    cfg.pipeline_repeats))
    for path, a in jax.tree_util.tree_leaves_with_path(ref_p):  # params − gradients
        b = pp_p
        for k in path:
            b = b[k.key]
        np.testing.assert_allclose(b, a, **SHARDED_FP32, err_msg=jax.tree_util.keystr(path))
    for a, b in zip(jax.tree.leaves(ref_r), jax.tree.leaves(pp_r)):  # router biases moved by the same loads
        np.testing.assert_array_equal(b, a)


def test_circular_layout_regroups_units_by_virtual_stage():
    """to_stages puts unit (r·S + s)·L + l at [s, r, l]; from_stages inverts it."""
    spec = pipeline_spec(_cfg(pipeline_repeats=2), shd.make_mesh(dict(stage=2, fsdp=4)), 8)
    assert (spec.stages, spec.repeats, spec.microbatches, spec.units_per_stage) == (2, 2, 2, 2)
    mesh = shd.make_mesh(dict(stage=2, fsdp=4))
    staged = jax.jit(lambda u: to_stages(u, spec, mesh))(jnp.arange(8.0))
    np.testing.assert_array_equal(np.asarray(staged), [[[0, 1], [4, 5]], [[2, 3], [6, 7]]])
    np.testing.assert_array_equal(np.asarray(from_stages(staged, spec)), np.arange(8.0))


def test_bubble_fraction_formula():
    assert bubble_fraction(4, 4, 1) == pytest.approx(3 / 7)
    assert bubble_fraction(4, 8, 2) == pytest.approx(3 / 19)
    assert bubble_fraction(1, 4, 1) == 0.0


@pytest.mark.parametrize("overrides, mesh_shape, message", [
    (dict(pipeline_repeats=3), dict(stage=2, fsdp=4), r"8 units, not divisible by mesh stage=2 × "
                                                      r"model.pipeline_repeats=3 = 6 virtual stages"),
    (dict(pipeline_microbatches=2), dict(stage=4, fsdp=2), r"pipeline_microbatches=2 is fewer than mesh stage=4"),
])
def test_bad_pipeline_layouts_name_the_values(overrides, mesh_shape, message):
    with pytest.raises(ValueError, match=message):
        pipeline_spec(_cfg(**overrides), shd.make_mesh(mesh_shape), 8)


def test_pipeline_config_fields_are_validated():
    with pytest.raises(ValueError, match=r"model.pipeline_repeats must be an int >= 1, got 0"):
        _cfg(pipeline_repeats=0)
    with pytest.raises(ValueError, match=r"model.pipeline_microbatches must be an int >= 0"):
        dataclasses.replace(_cfg(), pipeline_microbatches=-1)


def test_startup_check_names_the_microbatch_split():
    from composer2_jax.train.loop import validate_layout

    mesh = shd.make_mesh(dict(stage=2, fsdp=4))
    validate_layout(_cfg(pipeline_microbatches=2), mesh, 8, T, 1)
    with pytest.raises(ValueError, match=r"global batch 12 is not divisible by model.pipeline_microbatches=2 × "
                                         r"data×fsdp×expert = 8"):
        validate_layout(_cfg(pipeline_microbatches=2), mesh, 12, T, 1)
