"""The decoder block shared by the trunk (model/transformer.py) and the MTP depths (model/mtp.py).

    DecoderLayer   pre-norm: x + Attn(Norm(x)), then h + FFN(Norm(h)); FFN dense (SwiGLU) or MoE
    remat          activation checkpointing of a layer class by policy name (ModelConfig.remat_policy)
"""

from __future__ import annotations

from typing import Optional

import jax
from flax import linen as nn

from composer2_jax.model.attention import ATTENTION_OUT, CacheStep, MLAttention
from composer2_jax.model.layers import MLP, RMSNorm
from composer2_jax.model.moe import MoE
from composer2_jax.model_config import ModelConfig
from composer2_jax.sharding import Placement

RESIDUAL = ("activation_batch", "activation_length", "activation_embed")  # logical axes of the residual stream


class DecoderLayer(nn.Module):
    """Pre-norm block: x + Attn(Norm(x)), then h + FFN(Norm(h)); FFN dense or MoE."""

    cfg: ModelConfig
    moe: bool
    # where it runs (a `sharding.Placement`, or a mesh with the project's rules): its constraints, the attention
    # kernel's mesh and the MoE dispatch (expert-parallel over it, model/moe.py); None: no mesh
    placement: Optional[Placement | jax.sharding.Mesh] = None

    @nn.compact
    def __call__(self, x_BTD, positions_BT, segment_ids_BT=None, replay_BTk=None, cached: Optional[CacheStep] = None):
        """(x [B, T, D], MoE aux or None); with `cached` (decoding: model/attention.py `CacheStep`), attention runs
        against the layer's latent cache, MoE statistics count the tokens `cached.write` marks, and the result is
        ((x, aux), updated cache)."""
        c, at = self.cfg, Placement.of(self.placement)
        norm = lambda name: RMSNorm(c.rms_norm_eps, c.dtype, c.param_dtype, name=name)  # noqa: E731
        x_BTD = at.constrain(x_BTD, RESIDUAL)
        a_BTD = MLAttention(c, at, name="attn")(norm("attn_norm")(x_BTD), positions_BT, segment_ids_BT, cached)
        if cached is not None:
            a_BTD, cache = a_BTD
        h_BTD = at.constrain(x_BTD + a_BTD, RESIDUAL)
        if not self.moe:
            out = h_BTD + MLP(c, c.intermediate_size, at, name="mlp")(norm("ffn_norm")(h_BTD)), None
        else:
            valid = cached.write if cached is not None else None if segment_ids_BT is None else segment_ids_BT != 0
            y_BTD, aux = MoE(c, at, name="moe")(norm("ffn_norm")(h_BTD), valid, replay_BTk)
            out = h_BTD + y_BTD, aux
        return out if cached is None else (out, cache)


def checkpoint_policy(name: str):
    """The `jax.checkpoint` policy of a remat policy name other than 'none' (None: save nothing, recompute all)."""
    policies = {
        "full": None,
        "dots": jax.checkpoint_policies.checkpoint_dots,
        "dots_no_batch": jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims,
        "save_attention_out": jax.checkpoint_policies.save_only_these_names(ATTENTION_OUT),
    }
    if name not in policies:
        raise ValueError(f"unknown remat policy {name!r}; expected 'none' or one of {sorted(policies)}")
    return policies[name]


def remat(cls, policy: str):
    """Wrap a layer class in activation checkpointing with a named policy."""
    if policy == "none":
        return cls
    return nn.remat(cls, policy=checkpoint_policy(policy), prevent_cse=True)
