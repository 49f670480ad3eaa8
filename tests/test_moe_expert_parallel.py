"""Expert parallelism on 8 CPU devices equals the single-device layer: values, gradients, drops, router replay.

Meshes (our 5 named axes; the rest are 1): (8,) = expert=8 · (2, 4) = data=2, expert=4 ·
(1, 2, 4) = data=1, fsdp=2, expert=4 · and expert=2, tensor=2, context=2 (the expert FFN width split over tensor,
the sequence over context).
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn
from jax.sharding import PartitionSpec as P

from composer2_jax import sharding as shd
from composer2_jax.model.expert_parallel import (
    Experts,
    capacity,
    dropless_ep,
    ragged_all_to_all_native,
    ragged_all_to_all_padded,
)
from composer2_jax.model.moe import MoE
from composer2_jax.model_config import get_model_config
from tests.test_moe_layer import init_moe, naive_moe
from tests.tolerances import FP32_BLOCK, SHARDED_FP32

rng = np.random.default_rng(1)
MESHES = {"expert8": dict(expert=8), "data2_expert4": dict(data=2, expert=4),
          "data1_fsdp2_expert4": dict(data=1, fsdp=2, expert=4), "expert2_tensor2_context2": dict(expert=2, tensor=2,
                                                                                               context=2)}
B, T = 8, 6


def _on_mesh(shape):
    """Context manager making a mesh of our 5 axes and the rules table ambient."""
    return _Ambient(shd.make_mesh(shape))


class _Ambient:
    def __init__(self, mesh):
        self.mesh, self._cms = mesh, [jax.set_mesh(mesh), nn.logical_axis_rules(shd.LOGICAL_RULES)]

    def __enter__(self):
        for cm in self._cms:
            cm.__enter__()
        return self.mesh

    def __exit__(self, *exc):
        for cm in reversed(self._cms):
            cm.__exit__(*exc)


def _loss_and_grads(cfg, v, x, ct, replay=None, mesh=None):
    """(y, aux, grads wrt params and x) of sum(y·ct) + 0.1·balance_loss, jitted (expert-parallel over `mesh`)."""
    def loss(params, x):
        y, aux = MoE(cfg, mesh).apply(dict(v, params=params), x, None, replay)
        return jnp.sum(y * ct) + 0.1 * aux["balance_loss"], (y, aux)

    (_, (y, aux)), grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))(v["params"], x)
    return y, aux, grads


@functools.lru_cache(maxsize=None)
def _data():
    cfg = get_model_config("toy")
    x = rng.normal(size=(B, T, cfg.hidden_size)).astype(np.float32)
    ct = rng.normal(size=x.shape).astype(np.float32)
    return x, ct, init_moe(cfg, x)


def _problem(moe_impl="dropless"):
    """(cfg, x, cotangent, variables): the same data for every test."""
    return (get_model_config("toy", moe_impl=moe_impl),) + _data()


@functools.lru_cache(maxsize=None)
def _reference():
    """Single-device dropless run (no mesh)."""
    cfg, x, ct, v = _problem()
    return _loss_and_grads(cfg, v, x, ct)


def _assert_tree_close(a, b, tol):
    for (path, x), y in zip(jax.tree_util.tree_flatten_with_path(a)[0], jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), err_msg=jax.tree_util.keystr(path), **tol)


@pytest.mark.parametrize("mesh", list(MESHES))
def test_expert_parallel_matches_single_device(mesh):
    cfg, x, ct, v = _problem()
    y0, aux0, g0 = _reference()
    with _on_mesh(MESHES[mesh]) as m:
        y1, aux1, g1 = _loss_and_grads(cfg, v, x, ct, mesh=m)
        hlo = jax.jit(lambda p, x: MoE(cfg, m).apply(dict(v, params=p), x)).lower(v["params"], x).as_text()
    assert "all_to_all" in hlo or "all-to-all" in hlo  # the expert-parallel path really ran
    np.testing.assert_allclose(np.asarray(y1), np.asarray(y0), **SHARDED_FP32)
    np.testing.assert_array_equal(np.asarray(aux1["indices"]), np.asarray(aux0["indices"]))
    np.testing.assert_array_equal(np.asarray(aux1["load"]), np.asarray(aux0["load"]))
    np.testing.assert_allclose(float(aux1["balance_loss"]), float(aux0["balance_loss"]), **SHARDED_FP32)
    np.testing.assert_allclose(float(aux1["entropy"]), float(aux0["entropy"]), **SHARDED_FP32)
    _assert_tree_close(g1, g0, SHARDED_FP32)


def test_expert_parallel_padded_grouped_matmul_matches():
    """The GPU grouped-matmul path under EP, with a slack small enough that the exact fallback is taken too."""
    cfg, x, ct, v = _problem()
    y0, _, g0 = _reference()
    cfg_p = dataclasses.replace(cfg, moe_gmm_impl="padded", moe_dropless_slack=1.0)
    with _on_mesh(MESHES["data2_expert4"]) as m:
        y1, _, g1 = _loss_and_grads(cfg_p, v, x, ct, mesh=m)
    np.testing.assert_allclose(np.asarray(y1), np.asarray(y0), **SHARDED_FP32)
    _assert_tree_close(g1, g0, SHARDED_FP32)


def test_capacity_mode_matches_dropless_when_capacity_covers_max_load():
    cfg, x, ct, v = _problem()
    y0, _, g0 = _reference()
    n_local, k, e = B * T // 8, cfg.num_experts_per_tok, cfg.n_routed_experts
    cfg_c = dataclasses.replace(cfg, moe_impl="capacity", moe_capacity_factor=e / k)  # C = every local token
    assert capacity(n_local, k, e, e / k) == n_local
    with _on_mesh(MESHES["expert8"]) as m:
        y1, aux1, g1 = _loss_and_grads(cfg_c, v, x, ct, mesh=m)
    assert float(aux1["dropped"]) == 0.0
    np.testing.assert_allclose(np.asarray(y1), np.asarray(y0), **SHARDED_FP32)
    _assert_tree_close(g1, g0, SHARDED_FP32)


def _all_to_expert_zero(cfg):
    """Adversarial routing: every token's choices are experts 0, 1, ..., k-1 (expert 0 gets every token)."""
    return jnp.broadcast_to(jnp.arange(cfg.num_experts_per_tok, dtype=jnp.int32), (B, T, cfg.num_experts_per_tok))


def test_adversarial_routing_is_exact_when_dropless():
    cfg, x, _, v = _problem()
    forced = _all_to_expert_zero(cfg)
    with _on_mesh(MESHES["expert8"]) as m:
        y, aux = jax.jit(lambda x: MoE(cfg, m).apply(v, x, None, forced))(x)
    ref, _ = naive_moe(v, x, cfg, idx=np.asarray(forced))
    np.testing.assert_allclose(np.asarray(y).reshape(ref.shape), ref, **FP32_BLOCK)
    assert float(aux["load"][0]) == B * T and float(aux["dropped"]) == 0.0


def test_adversarial_routing_drops_exactly_the_overflow_in_capacity_mode():
    cfg, x, _, v = _problem()
    cfg_c = dataclasses.replace(cfg, moe_impl="capacity", moe_capacity_factor=1.0)
    n_shards, k, e = 8, cfg.num_experts_per_tok, cfg.n_routed_experts
    n_local = B * T // n_shards
    c = capacity(n_local, k, e, 1.0)  # ceil(6·2/8) = 2 slots per expert per shard
    forced = _all_to_expert_zero(cfg)
    with _on_mesh(MESHES["expert8"]) as m:
        y, aux = jax.jit(lambda x: MoE(cfg_c, m).apply(v, x, None, forced))(x)
    # each shard holds one sequence (B=8 over expert=8): its first C tokens keep both experts, the rest lose both
    kept = np.zeros((B, T, k), bool)
    kept[:, :c] = True
    ref, _ = naive_moe(v, x, cfg, idx=np.asarray(forced), kept=kept.reshape(B * T, k))
    np.testing.assert_allclose(np.asarray(y).reshape(ref.shape), ref, **FP32_BLOCK)
    dropped, assigned = B * (n_local - c) * k, B * T * k  # 32 of 96 (token, expert) pairs, as an exact fp32 ratio
    assert aux["dropped"] == np.float32(dropped) / np.float32(assigned)


@pytest.mark.parametrize("moe_impl", ["dropless", "capacity"])
def test_router_replay_is_bit_exact_under_expert_parallelism(moe_impl):
    cfg, x, _, v = _problem(moe_impl)
    cfg = dataclasses.replace(cfg, moe_capacity_factor=1.0)  # capacity mode: drops happen, and replay keeps them
    with _on_mesh(MESHES["data2_expert4"]) as m:
        apply = jax.jit(lambda x, r: MoE(cfg, m).apply(v, x, None, r))
        y, aux = jax.jit(lambda x: MoE(cfg, m).apply(v, x))(x)
        y_r, aux_r = apply(x, aux["indices"])
    np.testing.assert_array_equal(np.asarray(y_r), np.asarray(y))
    np.testing.assert_array_equal(np.asarray(aux_r["indices"]), np.asarray(aux["indices"]))
    assert float(aux_r["dropped"]) == float(aux["dropped"])


def test_padded_ragged_all_to_all_follows_the_documented_example():
    """The example of `jax.lax.ragged_all_to_all`'s docstring (axis of size 2) through the padded stand-in."""
    mesh = jax.make_mesh((2,), ("x",), axis_types=(jax.sharding.AxisType.Auto,), devices=jax.devices()[:2])
    operand = jnp.array([[1, 2, 2], [3, 4, 0]], jnp.float32)
    args = [jnp.array(a, jnp.int32) for a in ([[0, 1], [0, 1]], [[1, 2], [1, 1]], [[0, 0], [1, 2]], [[1, 1], [2, 1]])]

    def f(op, inp, send, out, recv):
        res = ragged_all_to_all_padded(op[0], jnp.zeros(4, op.dtype), inp[0], send[0], out[0], recv[0],
                                       axis_name="x", chunk=3)
        return res[None]

    got = jax.jit(jax.shard_map(f, mesh=mesh, in_specs=P("x"), out_specs=P("x")))(operand, *args)
    np.testing.assert_array_equal(np.asarray(got), [[1, 3, 0, 0], [2, 2, 4, 0]])


def test_native_ragged_path_lowers():
    """The GPU/TPU path (lax.ragged_all_to_all; XLA:CPU cannot compile it) traces and lowers with our offsets."""
    mesh = shd.make_mesh(dict(expert=8))
    e, d, f, n_tok, k = 16, 8, 4, 6, 2
    ex = Experts(jnp.zeros((e, d, f)), jnp.zeros((e, d, f)), jnp.zeros((e, f, d)))

    def body(x, idx, w, wg, wu, wo):
        return dropless_ep(x, idx, w, Experts(wg, wu, wo), "expert", "ragged", collective=ragged_all_to_all_native)

    fn = jax.shard_map(body, mesh=mesh, in_specs=(P("expert"),) * 3 + (P("expert"),) * 3, out_specs=P("expert"))
    args = (jnp.zeros((8 * n_tok, d)), jnp.zeros((8 * n_tok, k), jnp.int32), jnp.zeros((8 * n_tok, k))) + tuple(ex)
    text = jax.jit(fn).lower(*args).as_text()
    assert text.count("ragged_all_to_all") >= 2


def test_mesh_that_does_not_divide_the_experts_is_an_error():
    cfg = get_model_config("toy", n_routed_experts=12, n_group=1)
    x = jax.ShapeDtypeStruct((8, 4, cfg.hidden_size), jnp.float32)
    v = jax.eval_shape(lambda x: nn.unbox(MoE(cfg).init(jax.random.key(0), x)), x)
    with _on_mesh(dict(expert=8)) as m, pytest.raises(ValueError, match=r"n_routed_experts=12 .* size 8"):
        jax.eval_shape(MoE(cfg, m).apply, v, x)
    x3 = jax.ShapeDtypeStruct((8, 3, cfg.hidden_size), jnp.float32)
    with _on_mesh(dict(expert=4, context=2)) as m, pytest.raises(ValueError, match=r"sequence length=3 .* size 2"):
        jax.eval_shape(MoE(cfg, m).apply, v, x3)
