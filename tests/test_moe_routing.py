"""Aux-loss-free bias update (layer mapping, sign, convergence toward uniform load) and the per-step MoE metrics."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn

from composer2_jax.model import Transformer
from composer2_jax.model.layer_plan import moe_layer_ids
from composer2_jax.model.moe import moe_metrics, update_router_bias
from composer2_jax.model_config import get_model_config


def _router_state(cfg):
    """Zero router biases with the model's tree structure (no forward pass needed)."""
    tok = jnp.zeros((1, 4), jnp.int32)
    abstract = jax.eval_shape(lambda k: nn.unbox(Transformer(cfg).init(k, tok))["router_state"], jax.random.key(0))
    return jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), abstract)


def _layer_of(path_keys, cfg, unit=None):
    """Absolute layer id of a bias, from its path and (scanned) unit index — independent of the code under test."""
    k, p = cfg.first_k_dense_replace, cfg.moe_layer_freq
    if path_keys[0].startswith("layers_"):
        return int(path_keys[0].split("_")[1])
    u = int(path_keys[0].split("_")[1]) if path_keys[0].startswith("stack_") else unit
    return k + u * p + int(path_keys[1].split("_")[1])


@pytest.mark.parametrize("kw", [dict(num_layers=7, first_k_dense_replace=2, moe_layer_freq=2),  # stack + suffix
                                dict(num_layers=4, scan_layers=False),  # unrolled stack_{u}
                                dict(num_layers=3)])
def test_bias_update_reaches_the_right_layers(kw):
    cfg = get_model_config("toy", **kw)
    ids = moe_layer_ids(cfg)
    e = cfg.n_routed_experts
    load = np.zeros((len(ids), e), np.float32)
    for j in range(len(ids)):
        load[j, j % e] = 100.0  # layer j overloads expert j mod E
    state = _router_state(cfg)
    new = update_router_bias(state, jnp.asarray(load), 0.5, cfg)
    seen = []
    for path, bias in jax.tree_util.tree_flatten_with_path(new)[0]:
        keys = [getattr(q, "key", None) for q in path]
        if keys[0] == "mtp":  # MTP routers: moe_load has no rows for them (model/mtp.py update_mtp_router_bias does)
            np.testing.assert_array_equal(np.asarray(bias), 0.0)
            continue
        rows = [(bias[u], _layer_of(keys, cfg, u)) for u in range(bias.shape[0])] if bias.ndim == 2 \
            else [(bias, _layer_of(keys, cfg))]
        for b, layer in rows:
            j = ids.index(layer)
            expected = np.full(e, 0.5, np.float32)
            expected[j % e] = -0.5  # the overloaded expert goes down, every other one up
            np.testing.assert_array_equal(np.asarray(b), expected)
            seen.append(layer)
    assert sorted(seen) == ids
    with pytest.raises(ValueError, match="moe_load has 1 rows"):
        update_router_bias(state, jnp.asarray(load[:1]), 0.5, cfg)


def test_bias_update_moves_a_skewed_load_toward_uniform():
    cfg = get_model_config("toy", num_layers=2, n_group=1, topk_group=1)
    tok = jax.random.randint(jax.random.key(1), (4, 32), 0, cfg.vocab_size, dtype=jnp.int32)
    v = jax.jit(lambda k: nn.unbox(Transformer(cfg).init(k, tok)))(jax.random.key(0))
    params = v["params"]
    skew = jnp.linspace(0.0, 0.3, cfg.n_routed_experts)  # a rigged router: later experts are always preferred
    rs0 = jax.tree.map(lambda b: b + skew, v["router_state"])

    @jax.jit
    def loads(router_state):
        return Transformer(cfg).apply({"params": params, "router_state": router_state}, tok).moe_load

    def max_over_mean(load):
        return float(jnp.max(load / jnp.mean(load, axis=-1, keepdims=True)))

    rs, ratios = rs0, []
    for _ in range(20):
        load = loads(rs)
        ratios.append(max_over_mean(load))
        rs = update_router_bias(rs, load, 0.01, cfg)
    ratios.append(max_over_mean(loads(rs)))
    assert ratios[0] > 2.0, ratios  # the rig really skews the load
    assert ratios[-1] < 0.6 * ratios[0] and min(ratios[-5:]) < 1.6, ratios


def test_moe_metrics():
    cfg = get_model_config("toy", num_layers=2, moe_impl="capacity", moe_capacity_factor=0.5)
    tok = jax.random.randint(jax.random.key(1), (2, 16), 0, cfg.vocab_size, dtype=jnp.int32)
    v = jax.jit(lambda k: nn.unbox(Transformer(cfg).init(k, tok)))(jax.random.key(0))
    out = jax.jit(Transformer(cfg).apply)(v, tok)
    m = moe_metrics(out)
    n_moe = len(moe_layer_ids(cfg))
    assert m["moe/load"].shape == (n_moe, cfg.n_routed_experts) and m["moe/max_over_mean"].shape == (n_moe,)
    load = np.asarray(out.moe_load)
    np.testing.assert_allclose(np.asarray(m["moe/max_over_mean"]), load.max(-1) / load.mean(-1), rtol=1e-6)
    assert 0.5 <= float(m["moe/dropped_fraction"]) < 1.0  # at most half the pairs fit at capacity factor 0.5
    assert 0.0 < float(m["moe/router_entropy"]) <= np.log(cfg.n_routed_experts) + 1e-6
    dense = dataclasses.replace(cfg, n_routed_experts=0)
    assert moe_metrics(jax.eval_shape(lambda: Transformer(dense).apply(
        nn.unbox(Transformer(dense).init(jax.random.key(0), tok)), tok))) == {}
