"""Optimizers (AdamW; Muon for matrices with AdamW for the rest), schedules, masks, and MuonClip's QK-clip."""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp
import optax
from optax.contrib import MuonDimensionNumbers

from composer2_jax import sharding as shd
from composer2_jax.train import muon as muon_lib

BATCH_AXES = ("layers", "exp")  # leading axes that stack independent matrices (scanned layers, experts)
ADAM_ONLY = ("embedding", "lm_head", "router")  # Muon is for hidden matrices; these keep AdamW (Kimi K2 / Moonlight)


@dataclasses.dataclass(frozen=True)
class OptimConfig:
    """Optimizer and learning-rate schedule."""

    name: str = "adamw"  # adamw | muon (Muon on hidden matrices, AdamW on embedding, head, router, norms)
    lr: float = 3e-4  # peak learning rate
    schedule: str = "wsd"  # wsd (warmup-stable-decay) | cosine | constant
    warmup_steps: int = 100  # linear warmup from 0
    total_steps: int = 1000  # length of the schedule (the run's step budget)
    decay_fraction: float = 0.2  # wsd: fraction of total_steps spent in the final linear decay
    min_lr_ratio: float = 0.1  # final lr as a fraction of the peak
    b1: float = 0.9  # Adam β1
    b2: float = 0.95  # Adam β2
    eps: float = 1e-8  # Adam ε
    weight_decay: float = 0.1  # decoupled weight decay on matrices (never on norms)
    decay_embeddings: bool = True  # also decay the embedding and LM head
    clip_norm: float = 1.0  # global gradient-norm clip (0 = off)
    muon_beta: float = 0.95  # Muon momentum
    muon_rms: float = 0.2  # Muon update RMS matched to AdamW: scale √max(fan_in, fan_out)·0.2 (Moonlight)
    muon_shard_matrices: bool = True  # NS on whole matrices spread over all devices (train/muon.py); False: XLA decides
    qk_clip_tau: Optional[float] = None  # MuonClip τ (Kimi K2: 100); None = off

    def __post_init__(self):
        if self.name not in OPTIMIZERS:
            raise ValueError(f"optim.name={self.name!r}; expected one of {OPTIMIZERS}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"optim.schedule={self.schedule!r}; expected one of {SCHEDULES}")
        if self.lr < 0 or self.warmup_steps < 0 or self.total_steps < 0:
            raise ValueError(f"optim.lr={self.lr}, warmup_steps={self.warmup_steps}, total_steps={self.total_steps}; "
                             f"expected values >= 0")
        if not 0 <= self.decay_fraction <= 1 or not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"optim.decay_fraction={self.decay_fraction}, min_lr_ratio={self.min_lr_ratio}; "
                             f"expected values in [0, 1]")
        if self.clip_norm < 0 or self.weight_decay < 0:
            raise ValueError(f"optim.clip_norm={self.clip_norm}, weight_decay={self.weight_decay}; expected >= 0")
        if self.qk_clip_tau is not None and self.qk_clip_tau <= 0:
            raise ValueError(f"optim.qk_clip_tau={self.qk_clip_tau}; expected None (off) or > 0")


OPTIMIZERS = ("adamw", "muon")
SCHEDULES = ("wsd", "cosine", "constant")


def schedule(c: OptimConfig) -> optax.Schedule:
    """Learning-rate schedule by name."""
    end = c.lr * c.min_lr_ratio
    if c.schedule == "constant":
        return optax.join_schedules([optax.linear_schedule(0.0, c.lr, max(c.warmup_steps, 1)),
                                     optax.constant_schedule(c.lr)], [c.warmup_steps])
    if c.schedule == "cosine":
        return optax.warmup_cosine_decay_schedule(0.0, c.lr, max(c.warmup_steps, 1), max(c.total_steps, 2), end)
    decay = max(int(c.total_steps * c.decay_fraction), 1)  # wsd (OptimConfig admits nothing else)
    stable = max(c.total_steps - c.warmup_steps - decay, 0)
    return optax.join_schedules(
        [optax.linear_schedule(0.0, c.lr, max(c.warmup_steps, 1)), optax.constant_schedule(c.lr),
         optax.linear_schedule(c.lr, end, decay)], [c.warmup_steps, c.warmup_steps + stable])


def _name(path) -> list[str]:
    return [str(getattr(k, "key", getattr(k, "name", k))) for k in path]


def decay_mask(params, logical, c: OptimConfig):
    """True where weight decay applies: matrices (≥ 2 non-batch axes), never norms; embeddings per config."""
    def one(path, _, names):
        keys = _name(path)
        core = [n for n in names if n not in BATCH_AXES]
        if "norm" in names or len(core) < 2:
            return False
        return c.decay_embeddings or not any(k in ("embedding", "lm_head") for k in keys)

    return jax.tree_util.tree_map_with_path(one, params, logical, is_leaf=lambda x: isinstance(x, tuple))


def muon_dims(params, logical):
    """Muon dimension numbers per param (None → AdamW): reduction = input axes, batch = layers/experts.

    All kernels are laid out [in..., out...]; the input side is one axis except the attention output projection
    [H, V, D] whose input is (heads, head dim).
    """
    def one(path, leaf, names):
        keys = _name(path)
        core = [i for i, n in enumerate(names) if n not in BATCH_AXES]
        if any(k in ADAM_ONLY for k in keys) or "norm" in names or len(core) < 2:
            return None
        n_in = 2 if tuple(names[i] for i in core[:2]) == ("heads", "kv") and len(core) == 3 else 1
        return MuonDimensionNumbers(reduction_axis=tuple(core[:n_in]), output_axis=tuple(core[n_in:]))

    return jax.tree_util.tree_map_with_path(one, params, logical, is_leaf=lambda x: isinstance(x, tuple))


def muon_specs(logical):
    """Each parameter's PartitionSpec from its logical names under the project's rules (what `logical_shardings`
    places), for the distributed Newton–Schulz of `train/muon.py`."""
    return jax.tree.map(shd.logical_to_spec, logical, is_leaf=lambda x: isinstance(x, tuple))


def make_optimizer(c: OptimConfig, params, logical, mesh=None) -> optax.GradientTransformation:
    """Clip → AdamW or Muon(+AdamW) with the schedule and decay mask; Muon's Newton–Schulz is spread over `mesh`
    (the train step's, given explicitly) when optim.muon_shard_matrices is on and a mesh is given."""
    lr = schedule(c)
    mask = decay_mask(params, logical, c)
    if c.name == "adamw":
        opt = optax.adamw(lr, c.b1, c.b2, c.eps, weight_decay=c.weight_decay, mask=mask)
    else:  # muon (OptimConfig admits nothing else)
        adam = muon_lib.AdamFallback(b1=c.b1, b2=c.b2, eps=c.eps, weight_decay=c.weight_decay)
        sharding = muon_lib.NSSharding(muon_specs(logical), mesh) if c.muon_shard_matrices else None
        opt = muon_lib.muon(lr, muon_dims(params, logical), beta=c.muon_beta, weight_decay=c.weight_decay,
                            weight_decay_mask=mask, adam=adam, consistent_rms=c.muon_rms, sharding=sharding)
    return optax.chain(optax.clip_by_global_norm(c.clip_norm), opt) if c.clip_norm else opt


def qk_clip(attn_params, max_logit_H, tau: float):
    """MuonClip QK-clip (Kimi K2 report §2.1) for one MLA layer's params.

    For each head h with max pre-softmax logit S_h > τ, γ_h = τ / S_h: the head-specific q_C (nope) and k_C
    (nope, in W_kvb) columns scale by √γ_h, the head's q_R (rope) columns by γ_h, and the shared k_R is untouched,
    so that head's logits shrink by γ_h. Heads with S_h ≤ τ are unchanged. Works on stacked layers when
    max_logit has the same leading axes as the head axis.
    """
    gamma = jnp.minimum(1.0, tau / jnp.maximum(max_logit_H, 1e-6))  # [..., H]
    sq = jnp.sqrt(gamma)
    out = dict(attn_params)
    qname = "q_b_proj" if "q_b_proj" in attn_params else "q_proj"
    wq = attn_params[qname]  # [..., Q|D, H, N+R]
    n_nope = attn_params["kv_b_proj"].shape[-1] - attn_params["o_proj"].shape[-2]
    scale_q = jnp.concatenate([jnp.broadcast_to(sq[..., None], sq.shape + (n_nope,)),
                               jnp.broadcast_to(gamma[..., None], gamma.shape + (wq.shape[-1] - n_nope,))], -1)
    out[qname] = wq * scale_q[..., None, :, :].astype(wq.dtype)
    wkv = attn_params["kv_b_proj"]  # [..., L, H, N+V]
    v = wkv.shape[-1] - n_nope
    scale_kv = jnp.concatenate([jnp.broadcast_to(sq[..., None], sq.shape + (n_nope,)),
                                jnp.ones(sq.shape + (v,), sq.dtype)], -1)
    out["kv_b_proj"] = wkv * scale_kv[..., None, :, :].astype(wkv.dtype)
    return out
