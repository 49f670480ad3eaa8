"""The mesh is explicit end to end (issue 38): no ambient mesh/rules reads in the package, and the MoE layer and the
train step given a mesh compute the same program and numbers with or without `sharding.activate` around them."""

import contextlib
import dataclasses
import pathlib
import re

import jax
import numpy as np
import optax
import pytest

from composer2_jax import sharding as shd
from composer2_jax.model import Transformer
from composer2_jax.model.expert_parallel import expert_parallelism
from composer2_jax.model.moe import MoE
from composer2_jax.model_config import get_model_config
from composer2_jax.train.state import init_train_state
from composer2_jax.train.step import StepConfig, batch_shardings, make_train_step
from tests.test_moe_layer import init_moe
from tests.tolerances import SHARDED_FP32

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "composer2_jax"

# name -> the files allowed to hold it (relative to composer2_jax/); everything else reads no ambient state.
AMBIENT = {
    r"\bambient_mesh\b": (),
    r"\bambient_rules\b": (),
    r"\bin_per_shard_program\b": (),
    r"\bget_abstract_mesh\b": (),
    r"\bget_logical_axis_rules\b": (),
    r"\blogical_axis_rules\(": ("sharding.py",),  # only `activate` makes the rules ambient (for flax itself)
    r"\bset_mesh\(": ("sharding.py",),  # only `activate` makes a mesh ambient
    # flax's constraint: only in Placement.constrain (the decode caches take a Placement too: infer/kv_cache.py)
    r"\bwith_logical_constraint\(": ("sharding.py",),
    r"import[^\n]*\bconstrain\b": (),
}


def _hits(pattern: str) -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        for m in re.finditer(pattern, text):
            out.append(f"{path.relative_to(PACKAGE)}:{text.count(chr(10), 0, m.start()) + 1}")
    return out


@pytest.mark.parametrize("pattern", sorted(AMBIENT))
def test_no_ambient_mesh_or_rules_reads_come_back(pattern):
    allowed = AMBIENT[pattern]
    stray = [h for h in _hits(pattern) if h.split(":")[0] not in allowed]
    assert not stray, f"{pattern} outside {allowed or 'nowhere'}: {stray} (take the mesh from a sharding.Placement)"


def test_the_grep_sees_a_read_where_there_is_one():
    """The control: the patterns do match the code they forbid (a grep that matched nothing would prove nothing)."""
    assert _hits(r"\bset_mesh\(") and all(h.startswith("sharding.py:") for h in _hits(r"\bset_mesh\("))
    assert re.search(r"\bget_abstract_mesh\b", "mesh = jax.sharding.get_abstract_mesh()")
    assert re.search(r"import[^\n]*\bconstrain\b", "from composer2_jax.model.layers import MLP, constrain, param")


def test_one_function_decides_expert_parallelism():
    cfg = get_model_config("toy")
    mesh = shd.make_mesh(dict(data=2, expert=4))
    on = expert_parallelism(cfg, shd.Placement(mesh))
    assert on.mode == "shard_map" and on.axes.expert == "expert" and on.local_experts == cfg.n_routed_experts
    stage = expert_parallelism(cfg, shd.Placement(mesh).stage(per_shard=True))
    assert stage.mode == "per_shard" and stage.local_experts == cfg.n_routed_experts // 4
    assert expert_parallelism(cfg, shd.Placement()).mode == "off"
    one = shd.make_mesh({"fsdp": 1}, devices=jax.devices()[:1])
    assert expert_parallelism(cfg, shd.Placement(one)).mode == "off"
    assert expert_parallelism(dataclasses.replace(cfg, moe_expert_parallel=False), shd.Placement(mesh)).mode == "off"
    with pytest.raises(TypeError, match="expected a Placement, a jax.sharding.Mesh or None, got str"):
        shd.Placement.of("expert")


def test_moe_layer_given_a_mesh_runs_expert_parallel_without_an_ambient_mesh():
    cfg = get_model_config("toy")
    x = np.random.default_rng(0).normal(size=(8, 6, cfg.hidden_size)).astype(np.float32)
    v = init_moe(cfg, x)
    mesh = shd.make_mesh(dict(data=2, expert=4))
    f = jax.jit(lambda x: MoE(cfg, mesh).apply(v, x))
    bare_hlo = f.lower(x).as_text()
    y_bare, aux_bare = f(x)
    with shd.activate(mesh):
        g = jax.jit(lambda x: MoE(cfg, mesh).apply(v, x))
        wrapped_hlo = g.lower(x).as_text()
        y_in, aux_in = g(x)
    assert "all_to_all" in bare_hlo or "all-to-all" in bare_hlo  # the mesh alone made it expert-parallel
    assert bare_hlo == wrapped_hlo  # the same program whichever `with` block wraps the call
    np.testing.assert_array_equal(np.asarray(y_bare), np.asarray(y_in))
    np.testing.assert_array_equal(np.asarray(aux_bare["indices"]), np.asarray(aux_in["indices"]))
    y_one, _ = jax.jit(lambda x: MoE(cfg).apply(v, x))(x)  # and it is the single-device layer
    np.testing.assert_allclose(np.asarray(y_bare), np.asarray(y_one), **SHARDED_FP32)


def _program(hlo: str) -> str:
    """A compiled module's text without what varies between two traces of one program: the source-location tables
    and metadata, and the numbering of instruction names."""
    hlo = re.sub(r"\n(FileNames|FunctionNames|FileLocations|StackFrames)\n.*?\n\n", "\n", hlo, flags=re.S)
    hlo = re.sub(r", metadata=\{[^}]*\}", "", hlo)
    return re.sub(r"([A-Za-z_][\w\-]*)((?:\.\d+|\.clone)+)", r"\1.N", hlo)


def _batch(b, t):
    tok = np.random.default_rng(3).integers(0, 512, (b, t + 1)).astype(np.int32)
    return {"tokens": tok[:, :-1], "targets": tok[:, 1:], "loss_mask": np.ones((b, t), np.int32),
            "segment_ids": np.ones((b, t), np.int32), "positions": np.broadcast_to(np.arange(t, dtype=np.int32),
                                                                                   (b, t)).copy()}


@pytest.mark.slow  # two compiles of a sharded train step: ~60 s on 2 cores
def test_train_step_given_a_mesh_is_the_same_program_without_an_ambient_mesh():
    """Ring attention over `context`, the MoE dispatch over `expert`, the constraints and the loss chunks all take
    the model's mesh: the compiled step and its result do not depend on `activate` around the call."""
    cfg = dataclasses.replace(get_model_config("toy", num_layers=2), attention_kernel="ring", num_mtp_layers=1)
    mesh = shd.make_mesh(dict(context=2, expert=2, fsdp=2))
    model = Transformer(cfg, mesh)
    b, t = 8, 16
    batch = jax.device_put(_batch(b, t), batch_shardings(mesh))
    state, _, tx = init_train_state(model, lambda p, n: optax.sgd(1.0), mesh, jax.random.key(0), (b, t))

    def run(around):
        with around:  # the same source lines either way (the compiled text carries them as metadata)
            compiled = jax.jit(make_train_step(model, tx, StepConfig(loss_chunk=64))).lower(state, batch).compile()
            new, m = compiled(state, batch)
        return compiled.as_text(), jax.device_get(m), jax.device_get(new.params)

    (text0, m0, p0), (text1, m1, p1) = run(contextlib.nullcontext()), run(shd.activate(mesh))
    assert "collective-permute" in text0 and "all-to-all" in text0  # the ring and the MoE dispatch ran on the mesh
    assert _program(text0) == _program(text1)
    assert float(m0["loss"]) == float(m1["loss"]) and np.isfinite(float(m0["loss"]))
    for a, c in zip(jax.tree.leaves(p0), jax.tree.leaves(p1)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(c))
