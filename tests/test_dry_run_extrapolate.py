"""`--dry_run_depth=extrapolate` (composer2_jax/plan/extrapolate.py) against the full compile of the same step, on a
toy-size step with gpu_small cpt_bulk's structure (Muon, grad accumulation, full remat, scanned units)."""

import pytest

from composer2_jax import sharding as shd
from composer2_jax.model.layer_plan import layer_plan
from composer2_jax.plan.dry_run import stage_shape
from composer2_jax.plan.extrapolate import REDUCED_UNITS, Memory, extrapolated_peak, with_units
from composer2_jax.train.loop import stage_config
from experiments import cpt_bulk
from tests.tolerances import DRY_RUN_EXTRAPOLATED_PEAK_RTOL

TOY = dict(num_layers=6, seq_len=64, batch=16, grad_accum=2)  # 5 scan units; micro-batch 8 on the 8 test devices


def _shape(num_layers: int, seq_len: int, batch: int, grad_accum: int):
    c = cpt_bulk.get_config("toy")
    c.optim.name, c.model.remat_policy, c.model.num_layers = "muon", "full", num_layers
    c.data.seq_len, c.data.batch_size, c.step.grad_accum = seq_len, batch, grad_accum
    return stage_shape(stage_config(c))


def _peak(sh, cfg, mesh) -> int:
    return sum(Memory.of(sh.compile(cfg, mesh)[0].memory_analysis()))


@pytest.mark.slow  # five compiles of the toy step (about a minute each at the shared machine's usual load)
def test_extrapolated_peak_matches_the_full_compile_and_the_old_line_did_not():
    sh = _shape(**TOY)
    cfg, mesh = sh.model, shd.make_mesh(sh.mesh)
    n = layer_plan(cfg)[2]
    full = _peak(sh, cfg, mesh)
    est, how = extrapolated_peak(sh.compile, cfg, sh.optim, mesh, (sh.batch, sh.seq_len))
    assert abs(est - full) <= DRY_RUN_EXTRAPOLATED_PEAK_RTOL * full, (est, full, how)
    assert f"{REDUCED_UNITS[0]} and {REDUCED_UNITS[1]} of {n} scan units" in how
    # what the test guards against: the old line through the 1- and 2-unit peaks misses the full peak by more than
    # the tolerance (the 1-unit program's temporaries exceed the 2-unit program's)
    p1, p2 = (_peak(sh, with_units(cfg, u), mesh) for u in (1, 2))
    old = p1 + (n - 1) * (p2 - p1)
    assert abs(old - full) > DRY_RUN_EXTRAPOLATED_PEAK_RTOL * full, (p1, p2, full)


def test_extrapolate_refuses_a_stack_too_shallow_to_extrapolate():
    sh = _shape(**dict(TOY, num_layers=3))
    with pytest.raises(ValueError, match=r"more than 3 scan units.*has 2.*'full'"):
        extrapolated_peak(sh.compile, sh.model, sh.optim, shd.make_mesh(sh.mesh), (sh.batch, sh.seq_len))
