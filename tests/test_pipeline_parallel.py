"""Pipeline parallelism (model/pipeline.py) on 8 fake CPU devices: the pipelined step ≡ the unpipelined one.

stage=2 and stage=4, with and without repeats (circular schedule), with fsdp / expert parallelism inside a stage,
remat and MTP on: loss, gradients and parameters after an update equal the single-device step's
(tests/tolerances.py SHARDED_FP32), with model.pipeline_gather_params off and on; with it on, the compiled
program gathers the stage's parameters before the schedule loop and reduces their gradients after it, neither
inside it.
"""

import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from composer2_jax import sharding as shd
from composer2_jax.model import Transformer
from composer2_jax.model.pipeline import bubble_fraction, from_stages, pipeline_spec, to_stages
from composer2_jax.model_config import get_model_config
from composer2_jax.train.state import abstract_train_state, activate, init_train_state, logical_axes
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


def _run(cfg, mesh_shape, batch=None):
    """Metrics, params and router state after one train step on `mesh_shape` (None: one device).

    The optimizer is SGD with learning rate 1, so the params after the update are params − gradients: comparing
    them compares the gradients of the whole step (loss, MTP, balance loss) at the same tolerance."""
    devices = jax.devices()[:1] if mesh_shape is None else None
    mesh = shd.make_mesh(mesh_shape or {"fsdp": 1}, devices=devices)
    model = Transformer(cfg, mesh)
    state, _, tx = init_train_state(model, lambda p, n: optax.sgd(1.0), mesh, jax.random.key(0), (B, T))
    with activate(mesh):
        step = jax.jit(make_train_step(model, tx, StepConfig(loss_chunk=64)), donate_argnums=0)
        state, m = step(state, _batch() if batch is None else batch)
    return jax.device_get(m), jax.device_get(state.params), jax.device_get(state.router_state)


CASES = [  # (mesh, model overrides); the first is the fast suite's proof, the rest run in CI's slow step
    pytest.param(dict(stage=2, fsdp=2, expert=2), dict(pipeline_repeats=2, remat_policy="full"), id="s2-fsdp-ep-r2"),
    pytest.param(dict(stage=4, expert=2), dict(pipeline_repeats=2, num_mtp_layers=1), id="s4-ep-r2-mtp",
                 marks=pytest.mark.slow),
    pytest.param(dict(stage=2, fsdp=4), {}, id="s2-fsdp", marks=pytest.mark.slow),
    pytest.param(dict(stage=4, fsdp=2), dict(pipeline_microbatches=4, remat_policy="dots"), id="s4-fsdp",
                 marks=pytest.mark.slow),
    # model.pipeline_gather_params: the stage's parameters gathered once per step, before the schedule loop
    pytest.param(dict(stage=2, fsdp=2, expert=2), dict(pipeline_repeats=2, remat_policy="full",
                                                       pipeline_gather_params=True), id="s2-fsdp-ep-r2-gather"),
    pytest.param(dict(stage=2, fsdp=4), dict(pipeline_gather_params=True), id="s2-fsdp-gather",
                 marks=pytest.mark.slow),
]


def _at(tree, path):
    for k in path:
        tree = tree[k.key]
    return tree


def _print_deviation(mesh_shape, metric_pairs, param_pairs):
    """Print (pytest -s) the largest |pipelined − reference| of the metrics and of the updated params, and the
    largest share of the SHARDED_FP32 bound |a − b| ≤ atol + rtol·|b| any element uses."""
    def worst(pairs):
        diff = use = 0.0
        for a, b in pairs:
            a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
            d = np.abs(a - b)
            diff = max(diff, float(d.max(initial=0.0)))
            use = max(use, float((d / (SHARDED_FP32["atol"] + SHARDED_FP32["rtol"] * np.abs(b))).max(initial=0.0)))
        return diff, use

    (dm, um), (dp, up) = worst(metric_pairs), worst(param_pairs)
    print(f"\n{mesh_shape}: max |Δ| metrics {dm:.2e} (bound used {um:.0%}), params after update {dp:.2e} "
          f"(bound used {up:.0%})")


def _assert_same_step(cfg, mesh_shape, ref, pp):
    """The pipelined step `pp` (metrics, params, router state) equals the reference step `ref` at SHARDED_FP32."""
    (ref_m, ref_p, ref_r), (pp_m, pp_p, pp_r) = ref, pp
    keys = ("loss", "ce", "grad_norm", "balance_loss", "moe_load") + (("mtp/loss",) if cfg.num_mtp_layers else ())
    _print_deviation(mesh_shape, [(pp_m[k], ref_m[k]) for k in keys],
                     [(_at(pp_p, path), a) for path, a in jax.tree_util.tree_leaves_with_path(ref_p)])
    for key in keys:
        np.testing.assert_allclose(pp_m[key], ref_m[key], **SHARDED_FP32, err_msg=key)
    s = mesh_shape["stage"]
    assert pp_m["pipeline_bubble"] == pytest.approx(bubble_fraction(s, cfg.pipeline_microbatches or s,
                                                                    cfg.pipeline_repeats))
    for path, a in jax.tree_util.tree_leaves_with_path(ref_p):  # params − gradients
        np.testing.assert_allclose(_at(pp_p, path), a, **SHARDED_FP32, err_msg=jax.tree_util.keystr(path))
    for a, b in zip(jax.tree.leaves(ref_r), jax.tree.leaves(pp_r)):  # router biases moved by the same loads
        np.testing.assert_array_equal(b, a)


@pytest.mark.parametrize("mesh_shape, overrides", CASES)
def test_pipelined_step_matches_the_unpipelined_step(mesh_shape, overrides):
    cfg = _cfg(**overrides)
    _assert_same_step(cfg, mesh_shape, _run(cfg, None), _run(cfg, mesh_shape))


RING_CASES = [  # (mesh, model overrides): ring attention over `context` inside each stage; 7 min on a loaded CPU
    pytest.param(dict(stage=2, context=2, fsdp=2), dict(pipeline_repeats=2, remat_policy="full"),
                 id="s2-cp2-fsdp-r2", marks=pytest.mark.slow),
    # expert parallelism next to the ring, and model.pipeline_gather_params with context > 1 (the GSPMD gathered
    # layout: `gather_specs`, not the per-shard schedule)
    pytest.param(dict(stage=2, context=2, expert=2), dict(pipeline_gather_params=True), id="s2-cp2-ep-gather",
                 marks=pytest.mark.slow),
]


@pytest.mark.parametrize("mesh_shape, overrides", RING_CASES)
def test_pipelined_step_with_ring_attention_inside_a_stage_matches_the_single_device_step(mesh_shape, overrides):
    """Context parallelism inside a stage: the stage body's attention is the ring over `context` (its shard_map
    specs follow the stage placement's rules, sharding.Placement.stage), the batch arrives in zigzag
    layout (train/loop.py `_put_batch`; the MTP targets are shifted in that layout, model/mtp.py). The reference is
    the single-device step with the default kernel on the natural-order batch: the loss and every gradient are
    sums over tokens, so the token order does not change them beyond fp32 summation order."""
    from composer2_jax.model import context_parallel as cp

    cfg = _cfg(**overrides)
    ring = dataclasses.replace(cfg, attention_kernel="ring")
    zz = {k: np.asarray(v) for k, v in cp.zigzag_batch(_batch(), mesh_shape["context"]).items()}
    _assert_same_step(cfg, mesh_shape, _run(cfg, None), _run(ring, mesh_shape, zz))


def _hlo_computations(text):
    """{computation name: its instruction lines} of an HLO module's text."""
    comps, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$", line)
        if m:
            cur = comps.setdefault(m.group(1), [])
        elif cur is not None and line.startswith(" "):
            cur.append(line)
    return comps


def _reachable(comps, roots):
    """The computations `roots` call, transitively (fusions, calls, nested loops, branches), roots included."""
    seen, todo = set(), list(roots)
    while todo:
        c = todo.pop()
        if c in seen or c not in comps:
            continue
        seen.add(c)
        for line in comps[c]:
            for m in re.finditer(r"\b(?:calls|to_apply|body|condition|branch_computations|called_computations)="
                                 r"(?:\{([^}]*)\}|%?([\w.\-]+))", line):
                todo.extend(n.strip().lstrip("%") for n in (m.group(1) or m.group(2)).split(","))
    return seen


def _compiled_step(cfg, mesh_shape):
    """(HLO text of the compiled train step, one unit's matrix parameter leaves as (shape, logical names))."""
    mesh = shd.make_mesh(mesh_shape)
    model = Transformer(cfg, mesh)
    abstract, shardings, tx = abstract_train_state(model, lambda p, n: optax.sgd(1.0), mesh, (B, T))
    boxed = jax.eval_shape(lambda r: model.init(r, jnp.zeros((B, T), jnp.int32)), jax.random.key(0))
    axes = logical_axes(boxed)["params"]["stack"]
    leaves = [(leaf.shape[1:], names[1:]) for leaf, names in zip(
        jax.tree.leaves(abstract.params["stack"]), jax.tree.leaves(axes, is_leaf=lambda x: isinstance(x, tuple)))
        if leaf.ndim >= 3]  # matrices (a vector's shape could be an activation's too)
    batch = {k: jax.ShapeDtypeStruct((B, T), jnp.int32)
             for k in ("tokens", "targets", "loss_mask", "segment_ids", "positions")}
    with activate(mesh):
        step = jax.jit(make_train_step(model, tx, StepConfig(loss_chunk=64)), in_shardings=(shardings, None))
        return step.lower(abstract, batch).compile().as_text(), leaves


def _loop_computations(text):
    """(computations, the set of them reachable from the schedule's loops) of a compiled HLO module."""
    comps = _hlo_computations(text)
    bodies = set()
    for lines in comps.values():
        for line in lines:
            # the schedule's loop: traced at `_pipelined_stack/while`, or `_pipelined_stack/<shard_map>/while` in
            # the per-shard program (no loop between: the units' scans inside it are at `.../while/body/.../while`)
            m = re.search(r"\swhile\(.*body=%?([\w.\-]+).*op_name=\"[^\"]*_pipelined_stack/"
                          r"(?:(?!while)[^\"])*while\"", line)
            if m:
                bodies.add(m.group(1))
    loops = sorted(set(re.findall(r"\swhile\(.*op_name=\"([^\"]*)\"", text)))
    assert len(bodies) == 2, f"expected the schedule's forward and backward loops, found {sorted(bodies)} in {loops}"
    return comps, _reachable(comps, bodies)


def _count_gathers(text, leaves, mesh_shape):
    """(inside, outside) the schedule's loops: all-gathers of the stack's parameters, i.e. whose result's
    trailing dims are one unit's parameter leaf split only over `expert` (layouts differ, the logical shape does
    not)."""
    shapes = {tuple(d // (mesh_shape.get("expert", 1) if n == "exp" else 1) for d, n in zip(dims, names))
              for dims, names in leaves}
    comps, loop = _loop_computations(text)
    inside = outside = 0
    for name, lines in comps.items():
        for line in lines:
            m = re.search(r"=\s*[a-z0-9]+\[([\d,]*)\]\S*\s+all-gather(?:-start)?\(", line)
            if m and any(tuple(int(d) for d in m.group(1).split(",") if d)[-len(s):] == s for s in shapes):
                if name in loop:
                    inside += 1
                else:
                    outside += 1
    return inside, outside


def _count_grad_reductions(text, leaves, mesh_shape):
    """(inside, outside) the schedule's loops: all-reduce / reduce-scatter instructions that reduce a stack
    parameter's gradient, i.e. one of whose results (tuples included) has, up to unit dims and dim order (the
    partitioner may reduce a transposed or stacked layout), the shape of one unit's leaf in any layout the step
    uses: gathered, gathered but for `expert`, or split like the parameter itself (over `fsdp`/`expert`)."""
    rules = dict(shd.LOGICAL_RULES)

    def split(d, name, axes):
        own = rules.get(name)
        own = () if own is None else (own,) if isinstance(own, str) else own
        return d // int(np.prod([mesh_shape.get(a, 1) for a in own if a in axes]))

    shapes = set()
    for dims, names in leaves:
        for axes in ((), ("expert",), ("fsdp", "expert", "context", "tensor")):
            shapes.add(tuple(sorted(x for x in (split(d, n, axes) for d, n in zip(dims, names)) if x != 1)))
    comps, loop = _loop_computations(text)
    inside = outside = 0
    for name, lines in comps.items():
        for line in lines:
            m = re.search(r"=\s*(\(.*?\)|\S+)\s+(?:all-reduce|reduce-scatter)(?:-start)?\(", line)
            if not m:
                continue
            results = re.findall(r"[a-z0-9]+\[([\d,]*)\]", m.group(1))
            if any(tuple(sorted(int(d) for d in r.split(",") if d and int(d) != 1)) in shapes for r in results):
                if name in loop:
                    inside += 1
                else:
                    outside += 1
    return inside, outside


def test_gather_params_moves_the_stage_parameter_collectives_out_of_the_schedule_loop():
    """Off, GSPMD gathers a stage's FSDP-sharded weights inside the schedule's loops (every iteration, forward and
    the backward's recompute) and reduces each iteration's weight gradients there; with
    model.pipeline_gather_params neither is left there: the gathers run once before the loop, the gradients
    accumulate per device through the backward loop and are reduced once after it (model/pipeline.py
    `_run_per_shard`)."""
    mesh_shape = dict(stage=2, fsdp=2, expert=2)
    counts = {}
    for on in (False, True):
        text, leaves = _compiled_step(_cfg(pipeline_repeats=2, remat_policy="full", pipeline_gather_params=on),
                                      mesh_shape)
        counts[on] = _count_gathers(text, leaves, mesh_shape), _count_grad_reductions(text, leaves, mesh_shape)
    (gathers_off, grads_off), (gathers_on, grads_on) = counts[False], counts[True]
    assert gathers_off[0] > 0 and grads_off[0] > 0, counts
    assert gathers_on[0] == 0 and gathers_on[1] > 0, counts
    assert grads_on[0] == 0 and grads_on[1] > 0, counts


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
    with pytest.raises(ValueError, match=r"model.pipeline_gather_params must be a bool \(True / False\), got 'yes'"):
        _cfg(pipeline_gather_params="yes")


def test_startup_check_names_the_microbatch_split():
    from composer2_jax.train.loop import validate_layout

    mesh = shd.make_mesh(dict(stage=2, fsdp=4))
    validate_layout(_cfg(pipeline_microbatches=2), mesh, 8, T, 1)
    with pytest.raises(ValueError, match=r"global batch 12 is not divisible by model.pipeline_microbatches=2 × "
                                         r"data×fsdp×expert = 8"):
        validate_layout(_cfg(pipeline_microbatches=2), mesh, 12, T, 1)
