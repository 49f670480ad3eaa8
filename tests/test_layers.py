"""Each model piece against an independent naive NumPy reference (and RoPE/YaRN against the HF formula)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn

from composer2_jax.model.attention import MLAttention
from composer2_jax.model.layers import MLP, RMSNorm, apply_rope, rope_inv_freq, softmax_scale, yarn_mscale
from composer2_jax.model.moe import MoE, grouped_ffn, route
from composer2_jax.model_config import RopeScaling, get_model_config
from tests.tolerances import FP32_BLOCK, FP32_FN

rng = np.random.default_rng(0)


def _silu(x):
    return x / (1 + np.exp(-x))


def test_rmsnorm_matches_numpy():
    x = rng.normal(size=(3, 5, 16)).astype(np.float32)
    m = RMSNorm(1e-5)
    v = {"params": {"scale": rng.normal(size=16).astype(np.float32)}}
    ref = x / np.sqrt(np.mean(x * x, -1, keepdims=True) + 1e-5) * v["params"]["scale"]
    np.testing.assert_allclose(np.asarray(m.apply(v, x)), ref, **FP32_FN)


def test_swiglu_matches_numpy():
    cfg = get_model_config("toy")
    x = rng.normal(size=(2, 4, cfg.hidden_size)).astype(np.float32)
    m = MLP(cfg, 24)
    p = nn.unbox(m.init(jax.random.key(0), x))["params"]
    ref = (_silu(x @ p["wi_gate"]) * (x @ p["wi_up"])) @ p["wo"]
    np.testing.assert_allclose(np.asarray(m.apply({"params": p}, x)), ref, **FP32_FN)


def _hf_yarn_inv_freq(dim, base, s: RopeScaling):
    """transformers' `_compute_yarn_parameters` on a DeepseekV3Config (the HF reference)."""
    from transformers import DeepseekV3Config
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    cfg = DeepseekV3Config(hidden_size=64, num_attention_heads=4, qk_rope_head_dim=dim, max_position_embeddings=
                           int(s.original_max_position_embeddings * s.factor),
                           rope_parameters=dict(rope_type="yarn", rope_theta=base, factor=s.factor,
                                                original_max_position_embeddings=s.original_max_position_embeddings,
                                                beta_fast=s.beta_fast, beta_slow=s.beta_slow, mscale=s.mscale,
                                                mscale_all_dim=s.mscale_all_dim))
    inv, attn_factor = ROPE_INIT_FUNCTIONS["yarn"](cfg)
    return inv.numpy(), attn_factor


@pytest.mark.parametrize("s", [RopeScaling(64.0, 4096, 32.0, 1.0, 1.0, 1.0),
                               RopeScaling(32.0, 4096, 1.0, 1.0, 1.0, 1.0),
                               RopeScaling(8.0, 256, 32.0, 1.0, 0.707, 1.0)])
def test_yarn_frequencies_and_mscale_match_hf(s):
    inv_hf, factor_hf = _hf_yarn_inv_freq(64, 50000.0, s)
    np.testing.assert_allclose(rope_inv_freq(64, 50000.0, s), inv_hf, **FP32_FN)
    cfg = get_model_config("toy", rope_scaling=s, qk_rope_head_dim=64, rope_theta=50000.0)
    from composer2_jax.model.layers import rope_attention_factor
    assert math.isclose(rope_attention_factor(s), factor_hf, rel_tol=1e-12)
    assert math.isclose(softmax_scale(cfg), cfg.qk_head_dim ** -0.5 * yarn_mscale(s.factor, s.mscale_all_dim) ** 2)


def test_yarn_factor_one_is_plain_rope():
    s = RopeScaling(1.0, 4096, 32.0, 1.0, 1.0, 1.0)
    plain = 1.0 / (10000.0 ** (np.arange(0, 16, 2) / 16))
    np.testing.assert_allclose(rope_inv_freq(16, 10000.0, s), plain, **FP32_FN)
    cfg_y = get_model_config("toy", rope_scaling=s)
    cfg_p = get_model_config("toy", rope_scaling=None)
    x = rng.normal(size=(1, 6, 2, 8)).astype(np.float32)
    pos = jnp.arange(6)[None]
    np.testing.assert_array_equal(np.asarray(apply_rope(x, pos, cfg_y)), np.asarray(apply_rope(x, pos, cfg_p)))
    assert softmax_scale(cfg_y) == softmax_scale(cfg_p) == cfg_p.qk_head_dim ** -0.5


@pytest.mark.parametrize("interleave", [True, False])
def test_rope_is_a_rotation_by_position(interleave):
    """Each (pair) is rotated by angle pos·θ_i: compare with explicit 2x2 rotations of complex numbers."""
    cfg = get_model_config("toy", rope_scaling=None, rope_interleave=interleave)
    r = 8
    x = rng.normal(size=(1, 5, r)).astype(np.float32)
    pos = np.array([[0, 1, 2, 7, 30]])
    inv = 1.0 / (cfg.rope_theta ** (np.arange(0, r, 2) / r))
    if interleave:
        z = x[..., 0::2] + 1j * x[..., 1::2]
    else:
        z = x[..., : r // 2] + 1j * x[..., r // 2:]
    zr = z * np.exp(1j * pos[..., None] * inv)
    ref = np.concatenate([zr.real, zr.imag], -1)
    np.testing.assert_allclose(np.asarray(apply_rope(jnp.asarray(x), jnp.asarray(pos), cfg)), ref, **FP32_FN)


def _naive_mla(p, x, pos, seg, cfg):
    """MLA written out per head and per query with NumPy loops (no einsums, no shared helpers)."""
    c = cfg
    def norm(v, w):
        return v / np.sqrt(np.mean(v * v, -1, keepdims=True) + 1e-6) * w

    def rope(v, positions):  # v [..., R] non-interleaved pairs
        r = v.shape[-1]
        inv = rope_inv_freq(r, c.rope_theta, c.rope_scaling)
        from composer2_jax.model.layers import rope_attention_factor
        ang = positions[..., None] * inv
        f = rope_attention_factor(c.rope_scaling)
        v1, v2 = v[..., : r // 2], v[..., r // 2:]
        cos, sin = np.cos(ang) * f, np.sin(ang) * f
        return np.concatenate([v1 * cos - v2 * sin, v2 * cos + v1 * sin], -1)

    b, t, _ = x.shape
    q = np.einsum("btq,qhk->bthk", norm(x @ p["q_a_proj"], p["q_a_norm"]["scale"]), p["q_b_proj"])
    kv = x @ p["kv_a_proj"]
    ckv, kr = norm(kv[..., : c.kv_lora_rank], p["kv_a_norm"]["scale"]), kv[..., c.kv_lora_rank:]
    kvh = np.einsum("btl,lhx->bthx", ckv, p["kv_b_proj"])
    out = np.zeros((b, t, c.num_heads, c.v_head_dim), np.float64)
    scale = softmax_scale(c)
    for bi in range(b):
        krot = rope(kr[bi], pos[bi])
        for h in range(c.num_heads):
            qn, qr = q[bi, :, h, : c.qk_nope_head_dim], rope(q[bi, :, h, c.qk_nope_head_dim:], pos[bi])
            kn, v = kvh[bi, :, h, : c.qk_nope_head_dim], kvh[bi, :, h, c.qk_nope_head_dim:]
            for i in range(t):
                allowed = [j for j in range(t) if j <= i and seg[bi, j] == seg[bi, i]]
                logits = np.array([(qn[i] @ kn[j] + qr[i] @ krot[j]) * scale for j in allowed])
                w = np.exp(logits - logits.max())
                w /= w.sum()
                out[bi, i, h] = sum(wj * v[j] for wj, j in zip(w, allowed))
    return np.einsum("bthv,hvd->btd", out, p["o_proj"])


def test_mla_matches_naive_reference_with_segments():
    cfg = get_model_config("toy", rope_interleave=False)
    x = rng.normal(size=(2, 7, cfg.hidden_size)).astype(np.float32)
    pos = np.array([[0, 1, 2, 0, 1, 2, 3], [0, 1, 2, 3, 4, 5, 6]])
    seg = np.array([[1, 1, 1, 2, 2, 2, 2], [1, 1, 1, 1, 1, 1, 1]])
    m = MLAttention(cfg)
    p = nn.unbox(m.init(jax.random.key(0), x, jnp.asarray(pos), jnp.asarray(seg)))["params"]
    p = jax.tree.map(lambda a: a + 0.1 * rng.normal(size=a.shape).astype(np.float32) if a.ndim == 1 else a, p)
    got = m.apply({"params": p}, x, jnp.asarray(pos), jnp.asarray(seg))
    ref = _naive_mla(jax.tree.map(np.asarray, p), x.astype(np.float64), pos, seg, cfg)
    np.testing.assert_allclose(np.asarray(got), ref, **FP32_BLOCK)


def _naive_route(logits, bias, cfg):
    """Per-token Python reference of DeepSeek-V3 group-limited sigmoid routing."""
    e, g = cfg.n_routed_experts, cfg.n_group
    idx_all, w_all = [], []
    for row in logits:
        s = 1 / (1 + np.exp(-row))
        choice = s + bias
        per = e // g
        gscore = [sum(sorted(choice[i * per:(i + 1) * per])[-2:]) for i in range(g)]
        keep = sorted(range(g), key=lambda i: -gscore[i])[: cfg.topk_group]
        cand = [j for j in range(e) if j // per in keep]
        top = sorted(cand, key=lambda j: -choice[j])[: cfg.num_experts_per_tok]
        w = np.array([s[j] for j in top])
        if cfg.norm_topk_prob:
            w = w / (w.sum() + 1e-20)
        idx_all.append(top)
        w_all.append(w * cfg.routed_scaling_factor)
    return np.array(idx_all), np.array(w_all)


@pytest.mark.parametrize("groups", [(1, 1), (4, 2), (8, 3)])
def test_routing_matches_naive(groups):
    cfg = get_model_config("toy", n_routed_experts=16, num_experts_per_tok=4, n_group=groups[0], topk_group=groups[1])
    logits = rng.normal(size=(40, 16)).astype(np.float32)
    bias = (0.3 * rng.normal(size=16)).astype(np.float32)
    r = route(jnp.asarray(logits), jnp.asarray(bias), cfg)
    idx, w = _naive_route(logits.astype(np.float64), bias, cfg)
    got_idx = np.asarray(r.indices)
    order = np.argsort(got_idx, -1)
    ref_order = np.argsort(idx, -1)
    np.testing.assert_array_equal(np.take_along_axis(got_idx, order, -1), np.take_along_axis(idx, ref_order, -1))
    np.testing.assert_allclose(np.take_along_axis(np.asarray(r.weights), order, -1),
                               np.take_along_axis(w, ref_order, -1), **FP32_FN)


def test_grouped_ffn_matches_per_token_loop():
    n, d, f, e, k = 24, 8, 6, 5, 2
    x = rng.normal(size=(n, d)).astype(np.float32)
    idx = np.stack([rng.choice(e, k, replace=False) for _ in range(n)]).astype(np.int32)
    idx[:6] = [0, 1]  # skew: some experts get many tokens, some none
    w = rng.random((n, k)).astype(np.float32)
    wg, wu, wo = (rng.normal(size=s).astype(np.float32) for s in ((e, d, f), (e, d, f), (e, f, d)))
    got = grouped_ffn(jnp.asarray(x), jnp.asarray(idx), jnp.asarray(w), wg, wu, wo)
    ref = np.zeros((n, d))
    for i in range(n):
        for j in range(k):
            ex = idx[i, j]
            ref[i] += w[i, j] * ((_silu(x[i] @ wg[ex]) * (x[i] @ wu[ex])) @ wo[ex])
    np.testing.assert_allclose(np.asarray(got), ref, **FP32_BLOCK)


def test_moe_layer_matches_naive_and_has_gradients():
    cfg = get_model_config("toy")
    x = rng.normal(size=(2, 6, cfg.hidden_size)).astype(np.float32)
    m = MoE(cfg)
    v = nn.unbox(m.init(jax.random.key(0), x))
    v["router_state"]["e_score_correction_bias"] = jnp.asarray(0.2 * rng.normal(size=cfg.n_routed_experts), jnp.float32)
    y, aux = m.apply(v, x)
    p = jax.tree.map(np.asarray, v["params"])
    xf = x.reshape(-1, cfg.hidden_size).astype(np.float64)
    idx, w = _naive_route(xf @ p["router"], np.asarray(v["router_state"]["e_score_correction_bias"]), cfg)
    ref = np.zeros_like(xf)
    for i in range(len(xf)):
        for j, ex in enumerate(idx[i]):
            ref[i] += w[i, j] * ((_silu(xf[i] @ p["wi_gate"][ex]) * (xf[i] @ p["wi_up"][ex])) @ p["wo"][ex])
    s = p["shared_experts"]
    ref += (_silu(xf @ s["wi_gate"]) * (xf @ s["wi_up"])) @ s["wo"]
    np.testing.assert_allclose(np.asarray(y).reshape(ref.shape), ref, **FP32_BLOCK)
    assert aux["load"].sum() == 12 * cfg.num_experts_per_tok
    g = jax.grad(lambda pp: jnp.sum(m.apply(dict(v, params=pp), x)[0] ** 2))(v["params"])
    assert float(jnp.abs(g["router"]).sum()) > 0 and float(jnp.abs(g["wi_gate"]).sum()) > 0


def test_chunked_attention_matches_xla_attention_values_and_grads():
    from composer2_jax.model.attention import chunked_attention, xla_attention
    from composer2_jax.model.attention_mask import AttentionMask

    q, k, v = (jnp.asarray(rng.normal(size=(2, 32, 3, 8)), jnp.float32) for _ in range(3))
    seg = jnp.asarray(np.concatenate([np.ones((2, 20)), 2 * np.ones((2, 12))], 1).astype(np.int32))
    for segs in (None, seg):
        kw = dict(scale=0.3, mask=AttentionMask.self_attention(segs, causal=True))
        f = lambda q, k, v: jnp.sum(chunked_attention(q, k, v, chunk=8, **kw) ** 2)  # noqa: E731
        g = lambda q, k, v: jnp.sum(xla_attention(q, k, v, **kw) ** 2)  # noqa: E731
        np.testing.assert_allclose(f(q, k, v), g(q, k, v), **FP32_FN)
        for a, b in zip(jax.grad(f, (0, 1, 2))(q, k, v), jax.grad(g, (0, 1, 2))(q, k, v)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), **FP32_BLOCK)
