"""The decoder and the MTP depths run against latent caches: new tokens [B, T] in, hidden states and routing out.

The same function serves prefill (T = prompt length, slots from 0), plain decode (T = 1) and speculative verify
(T = 1 + drafts). Attention is functional (infer/mla_decode.py); norms, the dense MLP and the MoE block are the
model's own modules applied to the layer's parameter subtree, so routing (incl. the aux-loss-free bias and expert
parallelism under an ambient mesh) is exactly the training model's.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from composer2_jax.infer import kv_cache
from composer2_jax.infer.mla_decode import cached_attention, rms_norm
from composer2_jax.model.block import RESIDUAL
from composer2_jax.model.layer_plan import SCANNED_STACK, layer_slots, layer_subtree
from composer2_jax.model.layers import MLP, constrain, dtype_of
from composer2_jax.model.moe import MoE
from composer2_jax.model.mtp import mtp_embedding, mtp_is_moe
from composer2_jax.model_config import ModelConfig
from composer2_jax.sharding import Placement


class Layer(NamedTuple):
    """One decoder layer's parameter and router-state subtrees."""

    params: dict
    router_state: dict
    moe: bool


def trunk_layers(params: dict, router_state: dict, cfg: ModelConfig) -> list[Layer]:
    """The decoder layers in model order, from either layout (scanned `stack` sliced per unit, or `stack_{u}`)."""
    slots = layer_slots(cfg, scanned=SCANNED_STACK in params)
    return [Layer(layer_subtree(params, s), layer_subtree(router_state, s, {}), s.moe) for s in slots]


def decoder_layer(layer: Layer, cache: kv_cache.LayerCache, x_BTD, pos_BT, write_BT, cfg: ModelConfig,
                  absorb: bool = True, mesh=None):
    """x + Attn(Norm(x)), then h + FFN(Norm(h)) — `transformer.DecoderLayer` against a cache. (x, cache, ids)."""
    p = layer.params
    x_BTD = constrain(x_BTD, RESIDUAL)
    a_BTD, cache = cached_attention(p["attn"], cache, rms_norm(p["attn_norm"], x_BTD, cfg.rms_norm_eps, cfg),
                                    pos_BT, write_BT, cfg, absorb)
    h_BTD = constrain(x_BTD + a_BTD, RESIDUAL)
    f_BTD = rms_norm(p["ffn_norm"], h_BTD, cfg.rms_norm_eps, cfg)
    if not layer.moe:
        return h_BTD + MLP(cfg, cfg.intermediate_size, Placement.of(mesh)).apply({"params": p["mlp"]}, f_BTD), cache, \
            None
    y_BTD, aux = MoE(cfg, mesh).apply({"params": p["moe"], "router_state": layer.router_state["moe"]}, f_BTD, write_BT)
    return h_BTD + y_BTD, cache, aux["indices"]


class TrunkOut(NamedTuple):
    """The decoder's outputs for the new tokens."""

    hidden: jax.Array  # [B, T, D] before the final norm (h_0 for the MTP depths)
    normed: jax.Array  # [B, T, D] after it (the LM-head input)
    caches: tuple  # updated LayerCache per layer
    routing: Optional[jax.Array]  # [L_moe, B, T, k] expert ids, ModelOutput.routing order; None when dense


def trunk(params: dict, router_state: dict, caches: tuple, tokens_BT, pos_BT, write_BT, cfg: ModelConfig,
          absorb: bool = True, mesh=None) -> TrunkOut:
    """Embed → every decoder layer against its cache → final norm (MoE layers expert-parallel over `mesh`)."""
    x_BTD = jnp.take(params["embedding"], tokens_BT, axis=0).astype(dtype_of(cfg.dtype))
    new, ids = [], []
    for layer, cache in zip(trunk_layers(params, router_state, cfg), caches):
        x_BTD, cache, idx = decoder_layer(layer, cache, x_BTD, pos_BT, write_BT, cfg, absorb, mesh)
        new.append(cache)
        if idx is not None:
            ids.append(idx)
    normed_BTD = rms_norm(params["final_norm"], x_BTD, cfg.rms_norm_eps, cfg)
    return TrunkOut(x_BTD, normed_BTD, tuple(new), jnp.stack(ids) if ids else None)


def head(normed_XD, w_DV, cfg: ModelConfig):
    """fp32 logits [..., V] of the (shared) LM head, as `Transformer.head` computes them."""
    dt = dtype_of(cfg.dtype)
    return jnp.einsum("...D,DV->...V", normed_XD.astype(dt), w_DV.astype(dt), preferred_element_type=jnp.float32)


def mtp_depth(params: dict, router_state: dict, m: int, cache: kv_cache.LayerCache, h_BTD, next_tokens_BT, pos_BT,
              write_BT, cfg: ModelConfig, absorb: bool = True, mesh=None):
    """MTP depth m+1 (model/mtp.MTPLayer) against its cache: (h_k [B, T, D], final-normed h_k [B, T, D], cache).

    The head (`mtp_head(params, m)`, shared by default) is applied by the caller at the positions it needs.
    """
    p = params["mtp"][f"mtp_{m}"]
    rs = router_state.get("mtp", {}).get(f"mtp_{m}", {})
    dt = dtype_of(cfg.dtype)
    e_BTD = jnp.take(mtp_embedding(params, m), next_tokens_BT, axis=0).astype(dt)
    x_BTX = jnp.concatenate([rms_norm(p["enorm"], e_BTD, cfg.rms_norm_eps, cfg),
                             rms_norm(p["hnorm"], h_BTD.astype(dt), cfg.rms_norm_eps, cfg)], axis=-1)
    block = Layer(p["block"], rs.get("block", {}), mtp_is_moe(cfg, m))
    h_BTD, cache, _ = decoder_layer(block, cache, x_BTX @ p["eh_proj"].astype(dt), pos_BT, write_BT, cfg, absorb,
                                    mesh)
    return h_BTD, rms_norm(p["final_norm"], h_BTD, cfg.rms_norm_eps, cfg), cache
