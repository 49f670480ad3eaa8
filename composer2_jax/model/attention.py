"""Multi-head latent attention (MLA, DeepSeek-V2 §2.1) with a pluggable attention kernel.

Algorithm for x [B, T, D]:
  1. q = W_qb · RMSNorm(W_qa · x)            (or q = W_q · x when q_lora_rank is None)   [B, T, H, N+R]
  2. [c_kv, k_R] = W_kva · x; c_kv = RMSNorm(c_kv)                                      [B, T, L], [B, T, R]
  3. [k_N, v] = W_kvb · c_kv                                                            [B, T, H, N], [B, T, H, V]
  4. q_R, k_R = RoPE(q_R), RoPE(k_R); k = [k_N; k_R broadcast over heads]
  5. o = softmax(q·kᵀ · scale + mask) · v; out = W_o · o                                [B, T, D]
The kernel (step 5) is chosen by name from `KERNELS`; fused and ring kernels register themselves there.
Decoding calls the same module with `cached=CacheStep(...)`: the new tokens' latents are written into a cache and
the queries attend to every visible slot (`latent_attention`: absorbed, DeepSeek-V2 §2.1.2, or expanded).
'xla_causal_skip' (model/causal_attention.py) visits only the n(n+1)/2 causally visible blocks of the query-chunked
kernel, for plain (unpermuted) causal self-attention; other layouts fall back to 'xla_chunked'.
Context-parallel kernels ('ring', 'ring_latent', 'allgather_cp', 'allgather_cp_latent') load on first use; the
`*_latent` ones take c_kv, k_R and W_kvb instead of step 3 (the latent is what travels between devices).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
from flax import linen as nn
from jax.ad_checkpoint import checkpoint_name

from composer2_jax.model import kernel_paths, planning
from composer2_jax.model.attention_mask import CAUSAL, AttentionMask
from composer2_jax.model.attention_memory import check_attention_memory
from composer2_jax.model.layers import RMSNorm, apply_rope, dtype_of, param, softmax_scale
from composer2_jax.model_config import ModelConfig
from composer2_jax.sharding import Placement

# The q and kv latent norms use a fixed eps of 1e-6 in DeepSeek's and Kimi's reference code, whatever
# rms_norm_eps the decoder norms use (Kimi K2.5: 1e-5).
LATENT_NORM_EPS = 1e-6
NEG_INF = -1e30  # finite, so a fully masked row gives a uniform (not NaN) softmax
ATTENTION_OUT = "attention_out"  # checkpoint name of the attention block's output (remat 'save_attention_out')


def attention_mask(q_idx_BT, kv_idx_BS, q_seg_BT=None, kv_seg_BS=None, causal: bool = True):
    """Boolean [B, 1, T, S] mask: key index ≤ query index (causal) and equal segment ids (packing)."""
    mask = jnp.ones((q_idx_BT.shape[0], q_idx_BT.shape[1], kv_idx_BS.shape[1]), bool)
    if causal:
        mask &= kv_idx_BS[:, None, :] <= q_idx_BT[:, :, None]
    if q_seg_BT is not None:
        mask &= q_seg_BT[:, :, None] == kv_seg_BS[:, None, :]
    return mask[:, None]


def xla_attention(q_BTHK, k_BSHK, v_BSHV, *, scale: float, mask: AttentionMask = CAUSAL):
    """Plain XLA attention: fp32 logits and softmax, output in the value dtype."""
    kernel_paths.record("attention", "xla")
    return _dense(q_BTHK, k_BSHK, v_BSHV, scale, mask)


def _dense(q_BTHK, k_BSHK, v_BSHV, scale: float, mask: AttentionMask):
    """`xla_attention` without the record (also the body of each chunk of `chunked_attention`)."""
    b, t, s = q_BTHK.shape[0], q_BTHK.shape[1], k_BSHK.shape[1]
    q_idx = jnp.broadcast_to(jnp.arange(t), (b, t)) if mask.q_idx is None else mask.q_idx
    kv_idx = jnp.broadcast_to(jnp.arange(s), (b, s)) if mask.kv_idx is None else mask.kv_idx
    logits_BHTS = jnp.einsum("BTHK,BSHK->BHTS", q_BTHK, k_BSHK, preferred_element_type=jnp.float32) * scale
    visible = attention_mask(q_idx, kv_idx, mask.q_segment_ids, mask.kv_segment_ids, mask.causal)
    probs_BHTS = jax.nn.softmax(jnp.where(visible, logits_BHTS, NEG_INF), axis=-1)
    return jnp.einsum("BHTS,BSHV->BTHV", probs_BHTS.astype(v_BSHV.dtype), v_BSHV)


def chunked_attention(q_BTHK, k_BSHK, v_BSHV, *, scale: float, mask: AttentionMask = CAUSAL, chunk: int = 512):
    """Memory-efficient XLA attention (Rabe & Staats 2021): query chunks under a scan with rematerialisation,
    so peak memory is O(B·H·chunk·S) instead of O(B·H·T·S). Same maths as `xla_attention`."""
    b, t = q_BTHK.shape[0], q_BTHK.shape[1]
    if t > chunk and t % chunk:
        kernel_paths.fallback("attention", "xla", f"T = {t} is not a multiple of the chunk {chunk}: full [T, S] "
                                                  "logits")
    else:
        kernel_paths.record("attention", "xla_chunked")
    if t <= chunk or t % chunk:
        return _dense(q_BTHK, k_BSHK, v_BSHV, scale, mask)
    q_idx = jnp.broadcast_to(jnp.arange(t), (b, t)) if mask.q_idx is None else mask.q_idx
    q_seg = jnp.zeros((b, t), jnp.int32) if mask.q_segment_ids is None else mask.q_segment_ids
    kv_seg = None if mask.q_segment_ids is None else mask.kv_segment_ids
    n = t // chunk
    split = lambda a: jnp.moveaxis(a.reshape((b, n, chunk) + a.shape[2:]), 1, 0)  # noqa: E731  [n, B, c, ...]

    @jax.checkpoint
    def one(xs):
        q_, qi_, qs_ = xs
        rows = mask.replace(q_segment_ids=None if kv_seg is None else qs_, kv_segment_ids=kv_seg, q_idx=qi_)
        return _dense(q_, k_BSHK, v_BSHV, scale, rows)

    if planning.count_loops():
        # The planner's cost compiles take the T query rows as one rematerialised piece: XLA's cost analysis counts
        # a loop body once, and every chunk costs the same (each sees all S keys), so one piece counts the FLOPs of
        # the n chunks without tracing n unrolled copies (model/planning.py).
        return one((q_BTHK, q_idx, q_seg))
    _, o_nBcHV = jax.lax.scan(lambda _, xs: (None, one(xs)), None, (split(q_BTHK), split(q_idx), split(q_seg)))
    return jnp.moveaxis(o_nBcHV, 0, 1).reshape((b, t) + o_nBcHV.shape[3:])


def max_logits_per_head(q_BTHK, k_BSHK, positions_BT, segment_ids_BT, scale: float):
    """Per-head max of the visible pre-softmax logits [H] (MuonClip's S_h), masked by position and segment.

    Visibility comes from positions (not indices), so it also holds for the zigzag context-parallel layout.
    A plain einsum: QK-clip at scale wants the attention kernel to emit this maximum itself.
    """
    logits_BHTS = jnp.einsum("BTHK,BSHK->BHTS", q_BTHK, k_BSHK, preferred_element_type=jnp.float32) * scale
    mask = attention_mask(positions_BT, positions_BT, segment_ids_BT, segment_ids_BT, causal=True)
    return jnp.max(jnp.where(mask, logits_BHTS, -jnp.inf), axis=(0, 2, 3))


# Every kernel is called as kernel(q, k, v, *, scale, mask) with mask an attention_mask.AttentionMask (causal flag,
# packing ids, explicit positions); its own tuning knobs (e.g. `chunk`) keep their defaults.
KERNELS: dict[str, Callable] = {"xla": xla_attention, "xla_chunked": chunked_attention}

# Context-parallel kernels, imported on first use (they import xla_attention from here). A kernel with
# `takes_latent = True` is called as kernel(q, c_kv, k_R, W_kvb, *, scale, mask) instead; one with
# `takes_placement = True` also gets the layer's `placement=` (its mesh and rules: the context axis it runs over).
_LAZY_KERNELS: dict[str, tuple[str, str]] = {
    "ring": ("composer2_jax.model.ring_attention", "ring_kernel"),
    "ring_latent": ("composer2_jax.model.ring_attention", "ring_latent_kernel"),
    "allgather_cp": ("composer2_jax.model.context_parallel", "allgather_kernel"),
    "allgather_cp_latent": ("composer2_jax.model.context_parallel", "allgather_latent_kernel"),
    "xla_causal_skip": ("composer2_jax.model.causal_attention", "causal_skip_attention"),
}


def register_kernel(name: str, fn: Callable):
    """Make an attention kernel selectable by `model.attention_kernel = name`."""
    KERNELS[name] = fn


def get_kernel(name: str) -> Callable:
    """The attention kernel registered under `name`."""
    if name not in KERNELS and name in _LAZY_KERNELS:
        module, attr = _LAZY_KERNELS[name]
        register_kernel(name, getattr(importlib.import_module(module), attr))
    if name not in KERNELS:
        known = sorted(set(KERNELS) | set(_LAZY_KERNELS))
        raise ValueError(f"unknown attention kernel {name!r}; registered: {known}")
    return KERNELS[name]


class CacheStep(NamedTuple):
    """A cached MLA call: the layer's latent cache and which new tokens it stores.

    `cache` is any object with `write(ckv_BTL, kr_BTR, pos_BT, write_BT) -> cache` and `attend(fn, q_pos_BT)`,
    which returns fn(c_kv [B, S, L], k_R [B, S, R]) over slots s = position s (infer/kv_cache.LayerCache, the paged
    infer/paged_cache.PagedLayerCache, which reads only the pages the queries reach).
    """

    cache: Any
    write: jax.Array  # [B, T] bool: the new tokens whose latents are stored (padding and finished rows are not)
    absorb: bool = True  # latent-absorbed attention (decode); False: k, v expanded per head (prefill)


def latent_attention(q, keys, w_kvb, q_pos_BT, cfg: ModelConfig, absorb: bool = True):
    """Attention output o [B, T, H, V] of queries q = (q_N [B, T, H, N], roped q_R [B, T, H, R]) at positions
    q_pos over cached latents keys = (c_kv [B, S, L], k_R [B, S, R]), slot s visible iff s ≤ q.

    absorb (DeepSeek-V2 §2.1.2, "absorb W_UK into W_UQ and W_UV into W_O"), with W_kvb [L, H, N+V] = [W_kN; W_v]:
      q_lat = q_N·W_kNᵀ [B, T, H, L]; scores = (q_lat·c_kvᵀ + q_R·k_Rᵀ)·scale; o = (P·c_kv)·W_v
    — the logits of q_N·(c_kv·W_kN)ᵀ without forming k_N [B, S, H, N]: L + R values read per cached token instead
    of H·(N+R+V). Otherwise k_N, v are expanded per head from the cache first (what the training forward does).
    """
    qn_BTHN, qr_BTHR = q
    dt = dtype_of(cfg.dtype)
    ckv_BSL, kr_BSR = (a.astype(dt) for a in keys)
    n = cfg.qk_nope_head_dim
    rope_BHTS = jnp.einsum("BTHR,BSR->BHTS", qr_BTHR, kr_BSR, preferred_element_type=jnp.float32)
    if absorb:
        qlat_BTHL = jnp.einsum("BTHN,LHN->BTHL", qn_BTHN, w_kvb[..., :n])
        scores_BHTS = jnp.einsum("BTHL,BSL->BHTS", qlat_BTHL, ckv_BSL, preferred_element_type=jnp.float32) + rope_BHTS
    else:
        kv_BSHX = jnp.einsum("BSL,LHX->BSHX", ckv_BSL, w_kvb)
        scores_BHTS = jnp.einsum("BTHN,BSHN->BHTS", qn_BTHN, kv_BSHX[..., :n],
                                 preferred_element_type=jnp.float32) + rope_BHTS
    visible = (jnp.arange(ckv_BSL.shape[1])[None, None, :] <= q_pos_BT[:, :, None])[:, None]  # [B, 1, T, S]
    probs_BHTS = jax.nn.softmax(jnp.where(visible, scores_BHTS * softmax_scale(cfg), NEG_INF), axis=-1).astype(dt)
    if absorb:
        return jnp.einsum("BTHL,LHV->BTHV", jnp.einsum("BHTS,BSL->BTHL", probs_BHTS, ckv_BSL), w_kvb[..., n:])
    return jnp.einsum("BHTS,BSHV->BTHV", probs_BHTS, kv_BSHX[..., n:])


class MLAttention(nn.Module):
    """Multi-head latent attention; returns [B, T, D]."""

    cfg: ModelConfig
    placement: Placement = Placement()  # mesh and rules of its constraints and of the context-parallel kernels

    def _w(self, name, shape, axes):
        """A weight with logical axes, stored in param_dtype and cast to the compute dtype."""
        c = self.cfg
        init = nn.initializers.normal(c.initializer_range)
        return param(self, name, shape, axes, init, dtype_of(c.param_dtype)).astype(dtype_of(c.dtype))

    def _norm(self, name, x):
        """RMSNorm of a latent (q or kv)."""
        c = self.cfg
        return RMSNorm(LATENT_NORM_EPS, c.dtype, c.param_dtype, name=name)(x)

    def queries(self, x_BTD):
        """Per-head queries [B, T, H, N+R] before RoPE."""
        c, d = self.cfg, x_BTD.shape[-1]
        if c.q_lora_rank is None:
            return jnp.einsum("BTD,DHK->BTHK", x_BTD, self._w("q_proj", (d, c.num_heads, c.qk_head_dim),
                                                                 ("embed", "heads", "kv")))
        cq_BTQ = x_BTD @ self._w("q_a_proj", (d, c.q_lora_rank), ("embed", "q_lora"))
        cq_BTQ = self._norm("q_a_norm", cq_BTQ)
        return jnp.einsum("BTQ,QHK->BTHK", cq_BTQ, self._w("q_b_proj", (c.q_lora_rank, c.num_heads, c.qk_head_dim),
                                                             ("q_lora", "heads", "kv")))

    def latent(self, x_BTD, positions_BT):
        """Compressed KV latent c_kv [B, T, L] (normed) and the roped shared key k_R [B, T, R]: what MLA caches."""
        c, d = self.cfg, x_BTD.shape[-1]
        kv_BTX = x_BTD @ self._w("kv_a_proj", (d, c.kv_lora_rank + c.qk_rope_head_dim), ("embed", "kv_lora"))
        ckv_BTL, kr_BTR = kv_BTX[..., : c.kv_lora_rank], kv_BTX[..., c.kv_lora_rank:]
        return self._norm("kv_a_norm", ckv_BTL), apply_rope(kr_BTR, positions_BT, c)

    def expand(self, ckv_BSL, kr_BSR, w=None):
        """Per-head keys [B, S, H, N+R] and values [B, S, H, V] from the latent (w: W_kvb if already fetched)."""
        c = self.cfg
        w = self.kv_b_weight() if w is None else w
        kv_BSHX = jnp.einsum("BSL,LHX->BSHX", ckv_BSL, w)
        k_nope, v_BSHV = kv_BSHX[..., : c.qk_nope_head_dim], kv_BSHX[..., c.qk_nope_head_dim:]
        kr_BSHR = jnp.broadcast_to(kr_BSR[:, :, None, :], k_nope.shape[:3] + (c.qk_rope_head_dim,))
        return jnp.concatenate([k_nope, kr_BSHR], axis=-1), v_BSHV

    def kv_b_weight(self):
        """W_kvb [L, H, N+V] (exposed for latent-absorbed decode)."""
        c = self.cfg
        return self._w("kv_b_proj", (c.kv_lora_rank, c.num_heads, c.qk_nope_head_dim + c.v_head_dim),
                       ("kv_lora", "heads", "kv"))

    def output(self, o_BTHV):
        """Output projection [B, T, H, V] -> [B, T, D]."""
        c = self.cfg
        return jnp.einsum("BTHV,HVD->BTD", o_BTHV, self._w("o_proj", (c.num_heads, c.v_head_dim, c.hidden_size),
                                                           ("heads", "kv", "embed")))

    @nn.compact
    def __call__(self, x_BTD, positions_BT, segment_ids_BT=None, cached: Optional[CacheStep] = None):
        """Attention output [B, T, D], named ATTENTION_OUT for remat policies that save it; with `cached`,
        (output, updated cache) of the new tokens against the cache (`_decode`)."""
        if cached is not None:
            return self._decode(x_BTD, positions_BT, cached)
        return checkpoint_name(self._attend(x_BTD, positions_BT, segment_ids_BT), ATTENTION_OUT)

    def _decode(self, x_BTD, positions_BT, cached: CacheStep):
        """Write the new tokens' latents at their positions, then attend to every visible cache slot."""
        c = self.cfg
        x_BTD = x_BTD.astype(dtype_of(c.dtype))
        q_BTHK = self.queries(x_BTD)
        q = (q_BTHK[..., : c.qk_nope_head_dim], apply_rope(q_BTHK[..., c.qk_nope_head_dim:], positions_BT, c))
        cache = cached.cache.write(*self.latent(x_BTD, positions_BT), positions_BT, cached.write, self.placement)
        w_kvb = self.kv_b_weight()
        o_BTHV = cache.attend(lambda *keys: latent_attention(q, keys, w_kvb, positions_BT, c, cached.absorb),
                              positions_BT)
        return self.output(o_BTHV), cache

    def _attend(self, x_BTD, positions_BT, segment_ids_BT):
        c = self.cfg
        x_BTD = x_BTD.astype(dtype_of(c.dtype))
        q_BTHK = self.queries(x_BTD)
        q_BTHK = jnp.concatenate([q_BTHK[..., : c.qk_nope_head_dim],
                                  apply_rope(q_BTHK[..., c.qk_nope_head_dim:], positions_BT, c)], axis=-1)
        ckv_BTL, kr_BTR = self.latent(x_BTD, positions_BT)
        heads = ("activation_batch", "activation_length", "activation_heads", "activation_kv")
        w_kvb = self.kv_b_weight()
        if self.is_mutable_collection("intermediates"):  # requested by QK-clip (train/step.py)
            k_BTHK, _ = self.expand(ckv_BTL, kr_BTR, w_kvb)
            self.sow("intermediates", "max_logit", jax.lax.stop_gradient(
                max_logits_per_head(q_BTHK, k_BTHK, positions_BT, segment_ids_BT, softmax_scale(c))))
        check_attention_memory(c.attention_kernel, x_BTD.shape[1], x_BTD.shape[0], c.num_heads)
        kernel = get_kernel(c.attention_kernel)
        constrain = self.placement.constrain
        kw = dict(scale=softmax_scale(c), mask=AttentionMask.self_attention(segment_ids_BT))
        if getattr(kernel, "takes_placement", False):  # context-parallel kernels: the mesh they run over
            kw["placement"] = self.placement
        if getattr(kernel, "takes_latent", False):  # context-parallel kernels that pass the latent (ring_latent)
            latent = ("activation_batch", "activation_length", "activation_kv")
            o_BTHV = kernel(constrain(q_BTHK, heads), constrain(ckv_BTL, latent), constrain(kr_BTR, latent),
                            w_kvb, **kw)
            return self.output(constrain(o_BTHV, heads))
        k_BTHK, v_BTHV = self.expand(ckv_BTL, kr_BTR, w_kvb)
        q_BTHK, k_BTHK, v_BTHV = (constrain(a, heads) for a in (q_BTHK, k_BTHK, v_BTHV))
        o_BTHV = kernel(q_BTHK, k_BTHK, v_BTHV, **kw)
        return self.output(constrain(o_BTHV, heads))
