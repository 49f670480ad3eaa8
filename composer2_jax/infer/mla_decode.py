"""MLA against the latent cache, reading the same parameters as `model.attention.MLAttention` (functional: no module).

Absorbed attention (DeepSeek-V2 §2.1.2, "absorb W_UK into W_UQ and W_UV into W_O"), for new tokens x [B, T, D]
at positions q [B, T] and a cache holding c_kv [B, S, L], k_R [B, S, R] (the new tokens already written):
  1. q = W_qb·RMSNorm(W_qa·x) → q_N [B, T, H, N], q_R = RoPE(q[..., N:]) [B, T, H, R]
  2. split W_kvb [L, H, N+V] into W_kN [L, H, N] and W_v [L, H, V]
  3. q_lat = q_N·W_kNᵀ                                  [B, T, H, L]   (a per-head query in latent space)
  4. scores = (q_lat·c_kvᵀ + q_R·k_Rᵀ)·scale, masked to s ≤ q          [B, H, T, S]
     (q_N·k_N = q_N·(c_kv·W_kN)ᵀ = (q_N·W_kNᵀ)·c_kvᵀ: the same logits, without ever forming k_N [B, S, H, N])
  5. P = softmax(scores) (fp32); o_lat = P·c_kv           [B, T, H, L]
  6. o = o_lat·W_v [B, T, H, V]; out = o·W_o              [B, T, D]
Per token per layer it reads L + R cached values instead of H·(N+R+V). `expanded_attention` is the reference form
(materialise k, v from the cache, as the training forward does) used for prefill and for the equivalence test.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from composer2_jax.infer import kv_cache, paged_cache
from composer2_jax.model.attention import LATENT_NORM_EPS, NEG_INF
from composer2_jax.model.layers import RMSNorm, apply_rope, dtype_of, softmax_scale
from composer2_jax.model_config import ModelConfig


def _w(p: dict, name: str, cfg: ModelConfig):
    """A weight cast to the compute dtype, as MLAttention._w does."""
    return p[name].astype(dtype_of(cfg.dtype))


def rms_norm(p: dict, x, eps: float, cfg: ModelConfig):
    """The model's RMSNorm applied with the params {scale}."""
    return RMSNorm(eps, cfg.dtype, cfg.param_dtype).apply({"params": p}, x)


def queries(p: dict, x_BTD, pos_BT, cfg: ModelConfig):
    """(q_N [B, T, H, N], roped q_R [B, T, H, R])."""
    if cfg.q_lora_rank is None:
        q_BTHK = jnp.einsum("BTD,DHK->BTHK", x_BTD, _w(p, "q_proj", cfg))
    else:
        cq_BTQ = rms_norm(p["q_a_norm"], x_BTD @ _w(p, "q_a_proj", cfg), LATENT_NORM_EPS, cfg)
        q_BTHK = jnp.einsum("BTQ,QHK->BTHK", cq_BTQ, _w(p, "q_b_proj", cfg))
    n = cfg.qk_nope_head_dim
    return q_BTHK[..., :n], apply_rope(q_BTHK[..., n:], pos_BT, cfg)


def latent(p: dict, x_BTD, pos_BT, cfg: ModelConfig):
    """(normed c_kv [B, T, L], roped k_R [B, T, R]) of the new tokens: what the cache stores."""
    kv_BTX = x_BTD @ _w(p, "kv_a_proj", cfg)
    ckv_BTL = rms_norm(p["kv_a_norm"], kv_BTX[..., :cfg.kv_lora_rank], LATENT_NORM_EPS, cfg)
    return ckv_BTL, apply_rope(kv_BTX[..., cfg.kv_lora_rank:], pos_BT, cfg)


def _softmax(scores_BHTS, q_pos_BT):
    """fp32 softmax over the visible slots."""
    mask = kv_cache.visible(q_pos_BT, scores_BHTS.shape[-1])
    return jax.nn.softmax(jnp.where(mask, scores_BHTS, NEG_INF), axis=-1)


def absorbed_attention(p: dict, qn_BTHN, qr_BTHR, cache: kv_cache.LayerCache, q_pos_BT, cfg: ModelConfig):
    """Steps 2–6 of the module docstring: attention output [B, T, D] straight from the latent cache."""
    dt = dtype_of(cfg.dtype)
    w_LHX = _w(p, "kv_b_proj", cfg)
    wkn_LHN, wv_LHV = w_LHX[..., :cfg.qk_nope_head_dim], w_LHX[..., cfg.qk_nope_head_dim:]
    qlat_BTHL = jnp.einsum("BTHN,LHN->BTHL", qn_BTHN, wkn_LHN)
    ckv_BSL, kr_BSR = (a.astype(dt) for a in cache.keys())
    scores_BHTS = (jnp.einsum("BTHL,BSL->BHTS", qlat_BTHL, ckv_BSL, preferred_element_type=jnp.float32)
                   + jnp.einsum("BTHR,BSR->BHTS", qr_BTHR, kr_BSR, preferred_element_type=jnp.float32))
    probs_BHTS = _softmax(scores_BHTS * softmax_scale(cfg), q_pos_BT)
    olat_BTHL = jnp.einsum("BHTS,BSL->BTHL", probs_BHTS.astype(dt), ckv_BSL)
    o_BTHV = jnp.einsum("BTHL,LHV->BTHV", olat_BTHL, wv_LHV)
    return jnp.einsum("BTHV,HVD->BTD", o_BTHV, _w(p, "o_proj", cfg))


def expanded_attention(p: dict, qn_BTHN, qr_BTHR, cache: kv_cache.LayerCache, q_pos_BT, cfg: ModelConfig):
    """The reference form: k = [c_kv·W_kN; k_R], v = c_kv·W_v materialised per head, then plain attention."""
    dt = dtype_of(cfg.dtype)
    ckv_BSL, kr_BSR = (a.astype(dt) for a in cache.keys())
    kv_BSHX = jnp.einsum("BSL,LHX->BSHX", ckv_BSL, _w(p, "kv_b_proj", cfg))
    kn_BSHN, v_BSHV = kv_BSHX[..., :cfg.qk_nope_head_dim], kv_BSHX[..., cfg.qk_nope_head_dim:]
    scores_BHTS = (jnp.einsum("BTHN,BSHN->BHTS", qn_BTHN, kn_BSHN, preferred_element_type=jnp.float32)
                   + jnp.einsum("BTHR,BSR->BHTS", qr_BTHR, kr_BSR, preferred_element_type=jnp.float32))
    probs_BHTS = _softmax(scores_BHTS * softmax_scale(cfg), q_pos_BT)
    o_BTHV = jnp.einsum("BHTS,BSHV->BTHV", probs_BHTS.astype(dt), v_BSHV)
    return jnp.einsum("BTHV,HVD->BTD", o_BTHV, _w(p, "o_proj", cfg))


def cached_attention(p: dict, cache: kv_cache.LayerCache, x_BTD, pos_BT, write_BT, cfg: ModelConfig,
                     absorb: bool = True):
    """MLA of new tokens x [B, T, D] at positions pos: write their latents, attend to the cache. (out, cache)."""
    x_BTD = x_BTD.astype(dtype_of(cfg.dtype))
    qn_BTHN, qr_BTHR = queries(p, x_BTD, pos_BT, cfg)
    cache = cache.write(*latent(p, x_BTD, pos_BT, cfg), pos_BT, write_BT)
    attend = absorbed_attention if absorb else expanded_attention
    if isinstance(cache, paged_cache.PagedLayerCache):  # the rollout engine: read only the pages in reach
        return paged_cache.live_attention(lambda c: attend(p, qn_BTHN, qr_BTHR, c, pos_BT, cfg), cache, pos_BT), cache
    return attend(p, qn_BTHN, qr_BTHR, cache, pos_BT, cfg), cache
