"""Distributed Muon (train/muon.py): equal to optax.contrib.muon, sharded equal to unsharded, and no gathered stack."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from optax.contrib import MuonDimensionNumbers as Dims

from composer2_jax import sharding as shd
from composer2_jax.train import muon as muon_lib
from tests.tolerances import FP32_FN, SHARDED_FP32

# A tree shaped like the model's: stacked experts [layers, E, D, F], an attention output [H, V, D] whose input is
# (heads, head dim), a plain matrix, and AdamW leaves (embedding, norm).
SHAPES = {"experts": (2, 4, 16, 24), "o_proj": (4, 8, 16), "dense": (24, 16), "layers": (16, 8, 12),
          "embedding": (32, 16), "norm": (16,)}
DIMS = {"experts": Dims((2,), (3,)), "o_proj": Dims((0, 1), (2,)), "dense": Dims((0,), (1,)),
        "layers": Dims((1,), (2,)), "embedding": None, "norm": None}


def _tree(seed, scale=1.0):
    keys = jax.random.split(jax.random.key(seed), len(SHAPES))
    return {k: scale * jax.random.normal(r, s, jnp.float32) for r, (k, s) in zip(keys, SHAPES.items())}


def _run(tx, steps=3):
    params = _tree(0)
    state = tx.init(params)
    for i in range(steps):
        updates, state = tx.update(_tree(10 + i, 0.1), state, params)
        params = optax.apply_updates(params, updates)
    return params, state


def test_newton_schulz_orthogonalises_tall_and_wide_matrices():
    x = jax.random.normal(jax.random.key(1), (3, 24, 40), jnp.float32)
    for m in (x, jnp.swapaxes(x, 1, 2)):
        s = np.linalg.svd(np.asarray(muon_lib.newton_schulz(m)), compute_uv=False)
        # The quintic maps every singular value into roughly [0.7, 1.2] (Jordan 2024) — not exactly 1.
        assert s.min() > 0.5 and s.max() < 1.3, (s.min(), s.max())
    assert np.allclose(muon_lib.newton_schulz(jnp.zeros((1, 4, 6))), 0.0)  # padding matrices stay zero


def test_matches_optax_contrib_muon_and_keeps_its_state_tree():
    mask = {k: len(s) > 1 for k, s in SHAPES.items()}
    ours = muon_lib.muon(1e-2, DIMS, weight_decay=0.1, weight_decay_mask=mask,
                         adam=muon_lib.AdamFallback(b2=0.95, weight_decay=0.1))
    ref = optax.contrib.muon(1e-2, weight_decay=0.1, weight_decay_mask=mask, adam_b2=0.95, adam_weight_decay=0.1,
                             muon_weight_dimension_numbers=DIMS, consistent_rms=0.2)
    (p_ours, s_ours), (p_ref, s_ref) = _run(ours), _run(ref)
    assert jax.tree.structure(s_ours) == jax.tree.structure(s_ref)  # checkpoints of either restore into the other
    for k in SHAPES:
        np.testing.assert_allclose(p_ours[k], p_ref[k], **FP32_FN, err_msg=k)
    moved = {k: float(jnp.abs(p_ours[k] - _tree(0)[k]).max()) for k in SHAPES}
    assert min(moved.values()) > 1e-3, moved  # every leaf was actually updated


@pytest.mark.parametrize("mesh_shape", [{"fsdp": 8}, {"fsdp": 2, "expert": 4}, {"data": 1, "fsdp": 2, "expert": 4}])
def test_sharded_equals_unsharded(mesh_shape):
    mesh = shd.make_mesh(mesh_shape)
    specs = {"experts": P(None, "expert" if "expert" in mesh_shape else None, "fsdp", None),
             "o_proj": P(None, None, "fsdp"), "dense": P("fsdp", None), "embedding": P("fsdp", None), "norm": P(),
             "layers": P(None, "fsdp", None)}  # 16 stacked matrices, replicated over expert: that axis splits them
    tx = muon_lib.muon(1e-2, DIMS, weight_decay=0.1, sharding=muon_lib.NSSharding(specs, mesh))
    params = _tree(0)
    state = tx.init(params)
    grads = _tree(10, 0.1)
    want, _ = jax.jit(tx.update)(grads, state, params)
    put = lambda t: {k: jax.device_put(v, NamedSharding(mesh, specs[k])) for k, v in t.items()}  # noqa: E731
    with jax.set_mesh(mesh):
        got, _ = jax.jit(tx.update)(put(grads), jax.tree.map(lambda x: x, state), put(params))
    for k in SHAPES:
        np.testing.assert_allclose(got[k], want[k], **SHARDED_FP32, err_msg=k)


def test_the_stack_is_not_gathered_on_every_device():
    """With the stack resharded, each device orthogonalises 1/8 of the matrices: its temporaries shrink ~8×
    against letting XLA place NS on a stack whose D dimension is fsdp-sharded (the 1.37 TB case of docs/scaling.md)."""
    mesh = shd.make_mesh({"fsdp": 8})
    x = jax.ShapeDtypeStruct((16, 64, 256), jnp.float32, sharding=NamedSharding(mesh, P(None, "fsdp", None)))
    dims = Dims((1,), (2,))

    def compiled(shard_matrices):
        spec = P(None, "fsdp", None) if shard_matrices else None
        f = jax.jit(lambda m: muon_lib.orthogonalize(m, dims, spec, mesh=mesh),
                    out_shardings=NamedSharding(mesh, P(None, "fsdp", None)))
        with jax.set_mesh(mesh):
            c = f.lower(x).compile()
        gathers_whole = any("all-gather(" in line and "f32[16,64,256]" in line for line in c.as_text().splitlines())
        return c.memory_analysis().temp_size_in_bytes, gathers_whole

    whole = 16 * 64 * 256 * 4
    (distributed, gathered_d), (placed, gathered_p) = compiled(True), compiled(False)
    assert not gathered_d and distributed < 0.5 * whole, (distributed, whole)
    assert gathered_p and placed > 2 * distributed, (placed, distributed)  # the control: XLA gathers the stack
