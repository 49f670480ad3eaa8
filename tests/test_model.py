"""Whole-decoder properties: shapes, causality through gradients, jit ≡ eager, scan ≡ unrolled, remat ≡ none,
packed ≡ separate, router replay, abstract construction of the full Kimi-K2.5 preset and its parameter counts."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn

from composer2_jax.model import Transformer
from composer2_jax.model.layer_plan import layer_plan
from composer2_jax.model.transformer import stack_params, unstack_params
from composer2_jax.model_config import get_model_config
from composer2_jax.params import count_params
from tests.tolerances import FP32_BLOCK, FP32_FN


def _toy(**kw):
    return get_model_config("toy", **kw)


def _init(cfg, tokens, seed=0):
    variables = Transformer(cfg).init(jax.random.key(seed), tokens)
    return nn.unbox(variables)


def _tokens(b=2, t=16, seed=1, vocab=512):
    return jax.random.randint(jax.random.key(seed), (b, t), 0, vocab, dtype=jnp.int32)


def test_shapes_dtypes_finite():
    cfg = _toy()
    tok = _tokens()
    v = _init(cfg, tok)
    out = Transformer(cfg).apply(v, tok)
    n_moe = sum(cfg.is_moe_layer(i) for i in range(cfg.num_layers))
    assert out.logits.shape == (2, 16, cfg.vocab_size) and out.logits.dtype == jnp.float32
    assert out.hidden.shape == out.normed.shape == (2, 16, cfg.hidden_size)
    assert out.routing.shape == (n_moe, 2, 16, cfg.num_experts_per_tok)
    np.testing.assert_array_equal(np.asarray(out.moe_load.sum(-1)), 2 * 16 * cfg.num_experts_per_tok)
    assert bool(jnp.all(jnp.isfinite(out.logits))) and bool(jnp.isfinite(out.balance_loss))


def test_bf16_compute_keeps_fp32_params_and_logits():
    cfg = _toy(dtype="bfloat16")
    tok = _tokens()
    v = _init(cfg, tok)
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(v["params"]))
    out = Transformer(cfg).apply(v, tok)
    assert out.logits.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(out.logits)))


def test_causality_through_gradients():
    """d logits[t] / d embedding(token at s) is zero for s > t and non-zero for s ≤ t (distinct tokens)."""
    cfg = _toy()
    t = 12
    tok = jnp.arange(100, 100 + t, dtype=jnp.int32)[None]
    v = _init(cfg, tok)
    model = Transformer(cfg)
    def f(emb, q):
        params = dict(v["params"], embedding=emb)
        return jnp.take(model.apply(dict(v, params=params), tok).logits[0], q, axis=0).sum()

    grad = jax.jit(jax.grad(f))  # one compile for every query position
    for q in (0, 5, t - 1):
        g = grad(v["params"]["embedding"], q)
        row_norm = np.asarray(jnp.abs(g[100:100 + t]).sum(-1))
        assert np.all(row_norm[q + 1:] == 0.0), f"query {q} depends on future tokens: {row_norm}"
        assert np.all(row_norm[: q + 1] > 0.0), f"query {q} ignores past tokens: {row_norm}"


def test_jit_matches_eager():
    cfg = _toy()
    tok = _tokens()
    v = _init(cfg, tok)
    model = Transformer(cfg)
    jitted = jax.jit(model.apply)(v, tok).logits
    with jax.disable_jit():
        eager = model.apply(v, tok).logits
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), **FP32_BLOCK)


def _loss(model, v, tok):
    out = model.apply(v, tok)
    return jnp.mean(jax.nn.log_softmax(out.logits)[..., 0]) + 0.01 * out.balance_loss


def test_scan_matches_unrolled_values_and_gradients():
    cfg = _toy(num_layers=4)
    tok = _tokens()
    v = _init(cfg, tok)
    n_units = layer_plan(cfg)[2]
    cfg_u = dataclasses.replace(cfg, scan_layers=False)
    v_u = {k: unstack_params(x, n_units) for k, x in v.items()}
    assert jax.tree.structure(v_u) == jax.tree.structure(_init(cfg_u, tok))
    l_s, g_s = jax.value_and_grad(lambda p: _loss(Transformer(cfg), dict(v, params=p), tok))(v["params"])
    l_u, g_u = jax.value_and_grad(lambda p: _loss(Transformer(cfg_u), dict(v_u, params=p), tok))(v_u["params"])
    np.testing.assert_allclose(l_s, l_u, **FP32_FN)
    g_u_stacked = stack_params(g_u, n_units)
    for a, b in zip(jax.tree.leaves(g_s), jax.tree.leaves(g_u_stacked)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), **FP32_BLOCK)


@pytest.mark.parametrize("policy", ["full", "dots", "save_attention_out"])
def test_remat_matches_no_remat(policy):
    cfg = _toy()
    tok = _tokens()
    v = _init(cfg, tok)
    cfg_r = dataclasses.replace(cfg, remat_policy=policy)
    l0, g0 = jax.value_and_grad(lambda p: _loss(Transformer(cfg), dict(v, params=p), tok))(v["params"])
    l1, g1 = jax.jit(jax.value_and_grad(lambda p: _loss(Transformer(cfg_r), dict(v, params=p), tok)))(v["params"])
    np.testing.assert_allclose(l0, l1, **FP32_FN)
    for a, b in zip(jax.tree.leaves(g0), jax.tree.leaves(g1)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), **FP32_BLOCK)


def test_packed_sequences_match_separate_runs():
    cfg = _toy()
    a, b = _tokens(1, 5, seed=3)[0], _tokens(1, 7, seed=4)[0]
    pad = 4
    packed = jnp.concatenate([a, b, jnp.zeros(pad, jnp.int32)])[None]
    seg = jnp.array([[1] * 5 + [2] * 7 + [0] * pad])
    pos = jnp.array([list(range(5)) + list(range(7)) + list(range(pad))])
    v = _init(cfg, packed)
    model = Transformer(cfg)
    out = model.apply(v, packed, pos, seg).logits[0]
    la = model.apply(v, a[None]).logits[0]
    lb = model.apply(v, b[None]).logits[0]
    np.testing.assert_allclose(np.asarray(out[:5]), np.asarray(la), **FP32_BLOCK)
    np.testing.assert_allclose(np.asarray(out[5:12]), np.asarray(lb), **FP32_BLOCK)


def test_router_replay_is_bit_exact_and_changes_routing_when_forced():
    cfg = _toy()
    tok = _tokens()
    v = _init(cfg, tok)
    model = Transformer(cfg)
    out = model.apply(v, tok)
    replayed = model.apply(v, tok, routing=out.routing)
    np.testing.assert_array_equal(np.asarray(out.logits), np.asarray(replayed.logits))
    np.testing.assert_array_equal(np.asarray(out.routing), np.asarray(replayed.routing))
    forced = jnp.broadcast_to(jnp.arange(cfg.num_experts_per_tok, dtype=jnp.int32), out.routing.shape)
    out_forced = model.apply(v, tok, routing=forced)
    np.testing.assert_array_equal(np.asarray(out_forced.routing), np.asarray(forced))
    assert not np.allclose(np.asarray(out_forced.logits), np.asarray(out.logits))
    with pytest.raises(ValueError, match="MoE layers"):
        model.apply(v, tok, routing=out.routing[:1])


@pytest.mark.slow
def test_moe_layer_freq_and_dense_model_build():
    for kw in (dict(num_layers=5, first_k_dense_replace=1, moe_layer_freq=2), dict(n_routed_experts=0)):
        cfg = _toy(**kw)
        tok = _tokens(1, 8)
        v = _init(cfg, tok)
        out = Transformer(cfg).apply(v, tok)
        n_moe = sum(cfg.is_moe_layer(i) for i in range(cfg.num_layers))
        assert (out.routing is None) == (n_moe == 0)
        if n_moe:
            assert out.routing.shape[0] == n_moe
        assert bool(jnp.all(jnp.isfinite(out.logits)))


def _analytic_counts(c):
    """Parameter counts straight from the config dimensions (an independent formula)."""
    d, h = c.hidden_size, c.num_heads
    q = (d * c.q_lora_rank + c.q_lora_rank + c.q_lora_rank * h * c.qk_head_dim) if c.q_lora_rank \
        else d * h * c.qk_head_dim
    kv = (d * (c.kv_lora_rank + c.qk_rope_head_dim) + c.kv_lora_rank
          + c.kv_lora_rank * h * (c.qk_nope_head_dim + c.v_head_dim))
    attn = q + kv + h * c.v_head_dim * d + 2 * d  # + the two block norms
    expert = 3 * d * c.moe_intermediate_size
    n_moe = sum(c.is_moe_layer(i) for i in range(c.num_layers))
    dense = (c.num_layers - n_moe) * 3 * d * c.intermediate_size
    moe = n_moe * (d * c.n_routed_experts + expert * (c.n_routed_experts + c.n_shared_experts))
    total = 2 * c.vocab_size * d + d + c.num_layers * attn + dense + moe
    active = total - n_moe * expert * (c.n_routed_experts - c.num_experts_per_tok)
    return total, active


def test_full_kimi_k2_5_builds_abstractly_with_published_parameter_counts():
    cfg = get_model_config("kimi_k2_5", num_mtp_layers=0)  # the published counts are the trunk's (no MTP module)
    abstract = jax.eval_shape(lambda k: Transformer(cfg).init(k, jnp.zeros((1, 8), jnp.int32)), jax.random.key(0))
    total, active = count_params(nn.unbox(abstract)["params"], cfg)
    exp_total, exp_active = _analytic_counts(cfg)
    assert total == exp_total and active == exp_active
    assert math.isclose(total, 1.026e12, rel_tol=2e-3), total
    assert math.isclose(active, 32.86e9, rel_tol=2e-3), active
    bias = jax.tree.leaves(nn.unbox(abstract)["router_state"])
    assert sum(x.size for x in bias) == 60 * 384


def test_bad_config_names_the_values():
    with pytest.raises(ValueError, match=r"hidden_size=66 is not divisible by model.num_heads=4"):
        _toy(hidden_size=66)
    with pytest.raises(ValueError, match=r"n_routed_experts=8 is not divisible by model.n_group=3"):
        _toy(n_group=3)
    with pytest.raises(ValueError, match=r"unknown config key 'model.hiden_size'.*did you mean 'hidden_size'"):
        get_model_config("toy", hiden_size=64)
