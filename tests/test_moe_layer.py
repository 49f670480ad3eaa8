"""The MoE layer on one device against a per-token NumPy reference: dropless, capacity, statistics, balance loss."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn

from composer2_jax.model.expert_parallel import Experts, capacity, capacity_ffn
from composer2_jax.model.moe import MoE, sequence_balance_loss
from composer2_jax.model_config import get_model_config
from tests.tolerances import FP32_BLOCK, FP32_FN

rng = np.random.default_rng(0)


def _silu(x):
    return x / (1 + np.exp(-x))


def naive_route(logits, bias, cfg):
    """Per-token DeepSeek-V3 group-limited sigmoid routing in float64: (indices [N, k], weights [N, k])."""
    e, g = cfg.n_routed_experts, cfg.n_group
    per = e // g
    idx, wts = [], []
    for row in logits:
        s = 1 / (1 + np.exp(-row))
        choice = s + bias
        gscore = [sum(sorted(choice[i * per:(i + 1) * per])[-2:]) for i in range(g)]
        keep = sorted(range(g), key=lambda i: -gscore[i])[: cfg.topk_group]
        top = sorted([j for j in range(e) if j // per in keep], key=lambda j: -choice[j])[: cfg.num_experts_per_tok]
        w = np.array([s[j] for j in top])
        w = w / (w.sum() + 1e-20) if cfg.norm_topk_prob else w
        idx.append(top)
        wts.append(w * cfg.routed_scaling_factor)
    return np.array(idx), np.array(wts)


def naive_moe(v, x, cfg, idx=None, kept=None):
    """y [N, D] of the MoE layer token by token (routing recomputed unless `idx` is given; `kept` masks drops)."""
    p = jax.tree.map(lambda a: np.asarray(a, np.float64), v["params"])
    xf = np.asarray(x, np.float64).reshape(-1, cfg.hidden_size)
    bias = np.asarray(v["router_state"]["e_score_correction_bias"], np.float64)
    ridx, w = naive_route(xf @ p["router"], bias, cfg)
    if idx is not None:
        s = 1 / (1 + np.exp(-(xf @ p["router"])))
        ridx = np.asarray(idx).reshape(len(xf), -1)
        w = np.take_along_axis(s, ridx, -1)
        w = w / w.sum(-1, keepdims=True) * cfg.routed_scaling_factor
    y = np.zeros_like(xf)
    for i in range(len(xf)):
        for j, ex in enumerate(ridx[i]):
            if kept is None or kept[i, j]:
                y[i] += w[i, j] * ((_silu(xf[i] @ p["wi_gate"][ex]) * (xf[i] @ p["wi_up"][ex])) @ p["wo"][ex])
    s = p["shared_experts"]
    return y + (_silu(xf @ s["wi_gate"]) * (xf @ s["wi_up"])) @ s["wo"], ridx


def init_moe(cfg, x, seed=0, bias_scale=0.2):
    """MoE variables with a random (non-zero) router bias."""
    v = nn.unbox(jax.jit(MoE(cfg).init)(jax.random.key(seed), x))
    bias = jnp.asarray(bias_scale * rng.normal(size=cfg.n_routed_experts), jnp.float32)
    return dict(v, router_state={"e_score_correction_bias": bias})


@pytest.mark.parametrize("gmm", ["ragged", "padded"])
def test_moe_layer_matches_naive_with_gradients(gmm):
    cfg = get_model_config("toy", moe_gmm_impl=gmm, moe_dropless_slack=1.0)  # slack 1: the padded fallback also runs
    x = rng.normal(size=(2, 6, cfg.hidden_size)).astype(np.float32)
    v = init_moe(cfg, x)
    y, aux = jax.jit(MoE(cfg).apply)(v, x)
    ref, ridx = naive_moe(v, x, cfg)
    np.testing.assert_allclose(np.asarray(y).reshape(ref.shape), ref, **FP32_BLOCK)
    np.testing.assert_array_equal(np.sort(np.asarray(aux["indices"]).reshape(ridx.shape), -1), np.sort(ridx, -1))
    assert float(aux["load"].sum()) == 12 * cfg.num_experts_per_tok and float(aux["dropped"]) == 0.0
    g = jax.jit(jax.grad(lambda pp: jnp.sum(MoE(cfg).apply(dict(v, params=pp), x)[0] ** 2)))(v["params"])
    assert float(jnp.abs(g["router"]).sum()) > 0 and float(jnp.abs(g["wi_gate"]).sum()) > 0


def test_stats_count_valid_tokens_only():
    cfg = get_model_config("toy")
    x = rng.normal(size=(2, 5, cfg.hidden_size)).astype(np.float32)
    valid = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    v = init_moe(cfg, x)
    _, aux = jax.jit(MoE(cfg).apply)(v, x, jnp.asarray(valid))
    idx = np.asarray(aux["indices"])
    load = np.bincount(idx[valid].reshape(-1), minlength=cfg.n_routed_experts)
    np.testing.assert_array_equal(np.asarray(aux["load"]), load)
    s = 1 / (1 + np.exp(-(x.reshape(-1, cfg.hidden_size).astype(np.float64) @ np.asarray(v["params"]["router"]))))
    p = s / s.sum(-1, keepdims=True)
    ent = -(p * np.log(p)).sum(-1)[valid.reshape(-1)].mean()
    np.testing.assert_allclose(float(aux["entropy"]), ent, **FP32_FN)


def test_sequence_balance_loss_matches_naive():
    b, t, e, k = 3, 7, 8, 2
    scores = rng.random((b, t, e)).astype(np.float32)
    idx = np.stack([[rng.choice(e, k, replace=False) for _ in range(t)] for _ in range(b)])
    valid = rng.random((b, t)) > 0.3
    valid[:, 0] = True
    per_seq = []
    for i in range(b):
        rows = [j for j in range(t) if valid[i, j]]
        f = np.array([sum(ex in idx[i, j] for j in rows) for ex in range(e)]) * e / (k * len(rows))
        pn = np.mean([scores[i, j] / scores[i, j].sum() for j in rows], axis=0)
        per_seq.append(np.sum(f * pn))
    got = sequence_balance_loss(jnp.asarray(scores), jnp.asarray(idx), jnp.asarray(valid))
    np.testing.assert_allclose(float(got), np.mean(per_seq), **FP32_FN)


def test_capacity_equals_dropless_when_capacity_covers_max_load():
    cfg = get_model_config("toy")
    x = rng.normal(size=(2, 6, cfg.hidden_size)).astype(np.float32)
    v = init_moe(cfg, x)
    y_d, aux_d = jax.jit(MoE(cfg).apply)(v, x)
    max_load = float(aux_d["load"].max())
    factor = max_load * cfg.n_routed_experts / (12 * cfg.num_experts_per_tok)  # C = ceil(factor·N·k/E) = max load
    cfg_c = dataclasses.replace(cfg, moe_impl="capacity", moe_capacity_factor=factor)
    assert capacity(12, cfg.num_experts_per_tok, cfg.n_routed_experts, factor) == max_load
    y_c, aux_c = jax.jit(MoE(cfg_c).apply)(v, x)
    np.testing.assert_allclose(np.asarray(y_c), np.asarray(y_d), **FP32_BLOCK)
    assert float(aux_c["dropped"]) == 0.0


def test_capacity_drops_in_priority_order():
    """Slot-major, then token order; padding tokens last: hand-checked on 5 tokens, 3 experts, k=2, C=2."""
    idx = np.array([[0, 1], [0, 2], [1, 0], [0, 1], [2, 0]], np.int32)
    valid = np.array([1, 1, 1, 1, 0], np.float32)
    # expert 0: first choices of tokens 0, 1, 3 (token 3 dropped), then token 2's second choice (dropped)
    # expert 1: first choice of token 2, then token 0's second choice; token 3's second choice is dropped
    # expert 2: token 1's second choice, then token 4's first (padding goes last) -> both fit
    # token 4's second choice (expert 0, padding) finds expert 0 full -> dropped
    kept_ref = np.array([[1, 1], [1, 1], [1, 0], [0, 0], [1, 0]], bool)
    d, f = 4, 3
    x = rng.normal(size=(5, d)).astype(np.float32)
    ex = Experts(*(jnp.asarray(rng.normal(size=s), jnp.float32) for s in ((3, d, f), (3, d, f), (3, f, d))))
    w = np.ones((5, 2), np.float32)
    y, kept = capacity_ffn(jnp.asarray(x), jnp.asarray(idx), jnp.asarray(w), ex, 2, jnp.asarray(valid))
    np.testing.assert_array_equal(np.asarray(kept), kept_ref)
    ref = np.zeros((5, d))
    for i in range(5):
        for j in range(2):
            if kept_ref[i, j]:
                g, u, o = (np.asarray(a)[idx[i, j]] for a in ex)
                ref[i] += (_silu(x[i] @ g) * (x[i] @ u)) @ o
    np.testing.assert_allclose(np.asarray(y), ref, **FP32_BLOCK)
