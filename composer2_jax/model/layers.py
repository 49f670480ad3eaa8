"""Building blocks: parameter helpers with logical axes, RMSNorm, SwiGLU MLP, RoPE with DeepSeek-style YaRN."""

from __future__ import annotations

import math
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from composer2_jax.model import fp8
from composer2_jax.model_config import ModelConfig, RopeScaling
from composer2_jax.sharding import Placement

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}


def dtype_of(name: str):
    """jnp dtype from its config name."""
    return DTYPES[name]


def param(module: nn.Module, name: str, shape: Sequence[int], axes: Sequence[Optional[str]], init, dtype):
    """A parameter carrying logical axis names (the sharding table maps them to mesh axes)."""
    if len(shape) != len(axes):
        raise ValueError(f"{name}: shape {tuple(shape)} and logical axes {tuple(axes)} differ in rank")
    return module.param(name, nn.with_logical_partitioning(init, tuple(axes)), tuple(shape), dtype)


def embed_tokens(embed_VD, tokens_BT, dtype, placement: Placement = Placement()):
    """Embedding lookup [V, D] × [B, T] → [B, T, D] in the residual stream's layout.

    The table is constrained to (`vocab`, replicated D) first: gathering rows of an FSDP-sharded table yields rows
    split over D, which GSPMD cannot move to the batch split of the residual stream except by replicating the whole
    [B, T, D] activation ("involuntary full rematerialization"); an all-gather of the table (and a reduce-scatter of
    its gradient) moves V·D elements, independent of the batch.
    """
    table_VD = placement.constrain(embed_VD.astype(dtype), ("vocab", None))  # cast first: the gathered copy is in
    x_BTD = jnp.take(table_VD, tokens_BT, axis=0)  # `dtype`
    return placement.constrain(x_BTD, ("activation_batch", "activation_length", "activation_embed"))


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x²) + eps) · scale, computed in fp32 (Zhang & Sennrich 2019)."""

    eps: float
    dtype: str = "float32"
    param_dtype: str = "float32"

    @nn.compact
    def __call__(self, x):
        scale = param(self, "scale", (x.shape[-1],), ("norm",), nn.initializers.ones, dtype_of(self.param_dtype))
        x32 = x.astype(jnp.float32)
        y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
        return scale.astype(dtype_of(self.dtype)) * y.astype(dtype_of(self.dtype))


class MLP(nn.Module):
    """SwiGLU feed-forward: (silu(x·W_gate) ⊙ x·W_up)·W_out (Shazeer 2020); with model.matmul_precision = 'fp8'
    the three matmuls are block-scaled FP8 (model/fp8.py)."""

    cfg: ModelConfig
    width: int
    placement: Placement = Placement()  # the mesh and rules its activation constraint uses (sharding.Placement)

    @nn.compact
    def __call__(self, x_BTD):
        c = self.cfg
        init = nn.initializers.normal(c.initializer_range)
        pd, dt = dtype_of(c.param_dtype), dtype_of(c.dtype)
        d = x_BTD.shape[-1]
        w_gate = param(self, "wi_gate", (d, self.width), ("embed", "mlp"), init, pd).astype(dt)
        w_up = param(self, "wi_up", (d, self.width), ("embed", "mlp"), init, pd).astype(dt)
        w_out = param(self, "wo", (self.width, d), ("mlp", "embed"), init, pd).astype(dt)
        x_BTD = x_BTD.astype(dt)
        mm = fp8.fp8_matmul if c.matmul_precision == "fp8" else jnp.matmul
        h_BTF = jax.nn.silu(mm(x_BTD, w_gate)) * mm(x_BTD, w_up)
        h_BTF = self.placement.constrain(h_BTF, ("activation_batch", "activation_length", "activation_mlp"))
        return mm(h_BTF, w_out)


# ----------------------------------------------------------------------------------------------- RoPE / YaRN


def yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN attention temperature 0.1·m·ln(s) + 1 (1 for s ≤ 1) (Peng et al. 2023; DeepSeek-V2 form)."""
    if scale <= 1.0:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def _correction_dim(num_rotations: float, dim: int, base: float, max_pos: int) -> float:
    """Rotary dimension index whose wavelength fits `num_rotations` times into `max_pos`."""
    return dim * math.log(max_pos / (num_rotations * 2 * math.pi)) / (2 * math.log(base))


def rope_inv_freq(dim: int, theta: float, scaling: Optional[RopeScaling]) -> np.ndarray:
    """Inverse frequencies [dim/2]; with YaRN, blended between extrapolation and 1/s interpolation.

    DeepSeek YaRN: low = floor(d(β_fast)), high = ceil(d(β_slow)) with d(r) = dim·ln(L₀/(2πr)) / (2 ln θ),
    ramp_i = clip((i − low)/(high − low), 0, 1) over i < dim/2, inv = inv_interp·ramp + inv_extrap·(1 − ramp).
    """
    pos_freqs = theta ** (np.arange(0, dim, 2, dtype=np.float32) / dim)
    inv_extrap = (1.0 / pos_freqs).astype(np.float32)
    if scaling is None or scaling.factor == 1.0:
        return inv_extrap
    inv_interp = (1.0 / (scaling.factor * pos_freqs)).astype(np.float32)
    low = math.floor(_correction_dim(scaling.beta_fast, dim, theta, scaling.original_max_position_embeddings))
    high = math.ceil(_correction_dim(scaling.beta_slow, dim, theta, scaling.original_max_position_embeddings))
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # DeepSeek: avoid a zero-width ramp
    ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - low) / (high - low), 0, 1).astype(np.float32)
    extrap_weight = 1.0 - ramp
    return (inv_interp * (1 - extrap_weight) + inv_extrap * extrap_weight).astype(np.float32)


def rope_attention_factor(scaling: Optional[RopeScaling]) -> float:
    """Multiplier on cos/sin: mscale(s, mscale) / mscale(s, mscale_all_dim) (1 without YaRN)."""
    if scaling is None or scaling.factor == 1.0:
        return 1.0
    if scaling.mscale and scaling.mscale_all_dim:
        return yarn_mscale(scaling.factor, scaling.mscale) / yarn_mscale(scaling.factor, scaling.mscale_all_dim)
    return yarn_mscale(scaling.factor)


def softmax_scale(cfg: ModelConfig) -> float:
    """1/sqrt(K), times mscale(s, mscale_all_dim)² under YaRN (the DeepSeek softmax-scale correction)."""
    scale = cfg.qk_head_dim ** -0.5
    s = cfg.rope_scaling
    if s is not None and s.factor != 1.0 and s.mscale_all_dim:
        scale *= yarn_mscale(s.factor, s.mscale_all_dim) ** 2
    return scale


def apply_rope(x, positions, cfg: ModelConfig):
    """Rotate the last axis of x [..., T, H?, R] by positions [B, T]; output pairs laid out half-split.

    With `rope_interleave` the input pairs are (x0, x1), (x2, x3), ... as in released DeepSeek/Kimi weights;
    otherwise (x_i, x_{i+R/2}). Queries and keys go through the same map, so q·k is layout-independent.
    """
    r = x.shape[-1]
    inv = jnp.asarray(rope_inv_freq(r, cfg.rope_theta, cfg.rope_scaling))
    ang_BTr = positions.astype(jnp.float32)[..., None] * inv  # [B, T, R/2]
    factor = rope_attention_factor(cfg.rope_scaling)
    cos, sin = jnp.cos(ang_BTr) * factor, jnp.sin(ang_BTr) * factor
    if x.ndim == 4:  # [B, T, H, R]
        cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    cos, sin = cos.astype(x.dtype), sin.astype(x.dtype)
    if cfg.rope_interleave:
        x1, x2 = x[..., 0::2], x[..., 1::2]
    else:
        x1, x2 = x[..., : r // 2], x[..., r // 2:]
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
