"""The MLA latent KV cache: per layer the compressed latent c_kv [B, S, L] and the roped shared key k_R [B, S, R].

MLA's point (DeepSeek-V2 §2.1.2) is that these two are all attention needs: per-head keys and values are linear in
c_kv, so decode absorbs the up-projection W_kvb into the query and the output (model/attention.py
`latent_attention`) instead of expanding K/V. Per token and layer that is (L + R) values — Kimi K2.5: 512 + 64 =
576 — against H·(K + V) = 64·(192 + 128) = 20480 for an expanded cache (35.6× smaller).

Slot s of a row holds the token at position s (prompts start at slot 0; ragged rows just have different lengths).
Writes scatter at per-row positions and drop entries marked invalid, so padding, negative window positions and
finished rows never touch the cache; reads mask keys by position (key s is visible to a query at q iff s ≤ q).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from composer2_jax.model_config import ModelConfig
from composer2_jax.sharding import Placement

LATENT_BSX = ("activation_batch", None, "activation_kv")  # cache arrays: batch-sharded like the residual stream


class LayerCache(NamedTuple):
    """One attention layer's cache, contiguous per row (slot = position). The paged form (infer/paged_cache.py) has
    the same methods, so the model's attention (model/attention.py `CacheStep`) reads either."""

    ckv: jax.Array  # [B, S, L] normed compressed latent
    kr: jax.Array  # [B, S, R] roped shared rotary key

    def write(self, ckv_BTL, kr_BTR, pos_BT, write_BT, placement: Placement = Placement()) -> "LayerCache":
        """The cache with the new latents written (see `write`)."""
        return write(self, ckv_BTL, kr_BTR, pos_BT, write_BT, placement)

    def keys(self):
        """(c_kv [B, S, L], k_R [B, S, R]) with slot s = position s."""
        return self.ckv, self.kr

    def attend(self, fn, q_pos_BT):
        """fn(c_kv, k_R) over every slot (the caller masks slots past each query's position)."""
        del q_pos_BT
        return fn(*self.keys())


def init_cache(cfg: ModelConfig, n_layers: int, batch: int, max_len: int, dtype,
               placement: Placement = Placement()) -> tuple[LayerCache, ...]:
    """Zero caches for `n_layers` attention layers, each [B, S, L] + [B, S, R], batch-sharded over `placement`'s
    mesh (none: unconstrained)."""
    def one():
        return LayerCache(placement.constrain(jnp.zeros((batch, max_len, cfg.kv_lora_rank), dtype), LATENT_BSX),
                          placement.constrain(jnp.zeros((batch, max_len, cfg.qk_rope_head_dim), dtype), LATENT_BSX))
    return tuple(one() for _ in range(n_layers))


def write(cache: LayerCache, ckv_BTL, kr_BTR, pos_BT, write_BT, placement: Placement = Placement()) -> LayerCache:
    """Scatter the new latents into slots pos[b, t]; entries with write=False (or out of range) are dropped; the
    result stays batch-sharded over `placement`'s mesh."""
    s = cache.ckv.shape[1]
    slot_BT = jnp.where(write_BT & (pos_BT >= 0) & (pos_BT < s), pos_BT, s)  # s is out of range: dropped
    rows_BT = jnp.broadcast_to(jnp.arange(pos_BT.shape[0])[:, None], pos_BT.shape)
    ckv = cache.ckv.at[rows_BT, slot_BT].set(ckv_BTL.astype(cache.ckv.dtype), mode="drop")
    kr = cache.kr.at[rows_BT, slot_BT].set(kr_BTR.astype(cache.kr.dtype), mode="drop")
    return LayerCache(placement.constrain(ckv, LATENT_BSX), placement.constrain(kr, LATENT_BSX))


def bytes_per_token(cfg: ModelConfig, n_layers: int, dtype_bytes: int = 2) -> dict:
    """Cache bytes per token: latent (L + R per layer) vs an expanded K/V cache (H·(K + V) per layer)."""
    latent = n_layers * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * dtype_bytes
    expanded = n_layers * cfg.num_heads * (cfg.qk_head_dim + cfg.v_head_dim) * dtype_bytes
    return {"latent": latent, "expanded": expanded, "ratio": expanded / latent}
