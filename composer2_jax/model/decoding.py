"""The model against latent caches: new tokens [B, T] through the trunk's own `DecoderLayer`s and the MTP depths'
own `MTPLayer`s, each applied to its parameter subtree with `cached=CacheStep(...)` (model/attention.py).

`Decoder(cfg, absorb, mesh)` holds what does not change between calls (a static argument of jitted programs);
`trunk`, `mtp_depth` and `logits` take the variables {params, router_state}. One call serves prefill (T = a prompt
or chunk; `absorb=False` expands k, v per head), plain decode (T = 1) and speculative verify (T = 1 + drafts).
Layers are walked in model order from either parameter layout (model/layer_plan.py), so norms, attention, the dense
MLP and MoE routing (the aux-loss-free bias; expert parallelism over `mesh`) are the training model's, and a
checkpoint's params and router state are used as they are.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from composer2_jax.model.attention import CacheStep
from composer2_jax.model.block import DecoderLayer
from composer2_jax.model.layer_plan import SCANNED_STACK, layer_slots, layer_subtree
from composer2_jax.model.layers import RMSNorm, dtype_of, embed_tokens
from composer2_jax.model.mtp import MTPLayer, mtp_head, mtp_is_moe
from composer2_jax.model.transformer import head_logits
from composer2_jax.model_config import ModelConfig
from composer2_jax.sharding import Placement


class Feed(NamedTuple):
    """New tokens run against the caches."""

    tokens: jax.Array  # [B, T] int32 (an MTP depth: t_{j+k} at each position j)
    positions: jax.Array  # [B, T] int32, = the cache slots they take
    write: jax.Array  # [B, T] bool: tokens whose latents are stored and whom MoE statistics count


class TrunkOut(NamedTuple):
    """The decoder's outputs for the new tokens."""

    hidden: jax.Array  # [B, T, D] before the final norm (h_0 for the MTP depths)
    normed: jax.Array  # [B, T, D] after it (the LM-head input)
    caches: tuple  # updated cache per layer
    routing: Optional[jax.Array]  # [L_moe, B, T, k] expert ids, ModelOutput.routing order; None when dense


@dataclasses.dataclass(frozen=True)
class Decoder:
    """How the model runs against caches (hashable: a static argument of the engines' jitted programs)."""

    cfg: ModelConfig
    absorb: bool = True  # latent-absorbed attention (decode); False: k, v expanded per head (prefill)
    mesh: Optional[jax.sharding.Mesh] = None  # given: MoE layers dispatch expert-parallel over it (model/moe.py)

    def trunk(self, variables: dict, caches: tuple, feed: Feed) -> TrunkOut:
        """Embed → every `DecoderLayer` against its cache → final norm; variables = {params, router_state}."""
        c = self.cfg
        params, router_state = variables["params"], variables.get("router_state", {})
        x_BTD = embed_tokens(params["embedding"], feed.tokens, dtype_of(c.dtype), Placement.of(self.mesh))
        new, ids = [], []
        for slot, cache in zip(layer_slots(c, scanned=SCANNED_STACK in params), caches):
            layer = {"params": layer_subtree(params, slot), "router_state": layer_subtree(router_state, slot, {})}
            (x_BTD, aux), cache = DecoderLayer(c, slot.moe, self.mesh).apply(
                layer, x_BTD, feed.positions, cached=CacheStep(cache, feed.write, self.absorb))
            new.append(cache)
            if aux is not None:
                ids.append(aux["indices"])
        normed_BTD = RMSNorm(c.rms_norm_eps, c.dtype, c.param_dtype).apply({"params": params["final_norm"]}, x_BTD)
        return TrunkOut(x_BTD, normed_BTD, tuple(new), jnp.stack(ids) if ids else None)

    def mtp_depth(self, variables: dict, m: int, cache, h_BTD, feed: Feed):
        """MTP depth m+1 (`MTPLayer` mtp_{m}) against its cache, feed.tokens = t_{j+m+1} at each position j:
        (h_k [B, T, D], final-normed h_k [B, T, D], cache)."""
        c, params = self.cfg, variables["params"]
        layer = {"params": params["mtp"][f"mtp_{m}"],
                 "router_state": variables.get("router_state", {}).get("mtp", {}).get(f"mtp_{m}", {})}
        (h_BTD, normed_BTD, _), cache = MTPLayer(c, mtp_is_moe(c, m), self.mesh).apply(
            layer, h_BTD, feed.tokens, params["embedding"], feed.positions,
            cached=CacheStep(cache, feed.write, self.absorb))
        return h_BTD, normed_BTD, cache

    def logits(self, variables: dict, normed_XD, m: Optional[int] = None):
        """fp32 logits [..., V] of the trunk's LM head, or with `m` of MTP depth m+1's (`mtp.mtp_head`)."""
        params = variables["params"]
        return head_logits(normed_XD, params["lm_head"] if m is None else mtp_head(params, m), self.cfg)
