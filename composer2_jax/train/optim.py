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
    """Optimizer and schedule; see `optim_config_dict` for each field's meaning."""

    name: str = "adamw"
    lr: float = 3e-4
    schedule: str = "wsd"
    warmup_steps: int = 100
    total_steps: int = 1000
    decay_fraction: float = 0.2
    min_lr_ratio: float = 0.1
    b1: float = 0.9
    b2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1
    decay_embeddings: bool = True
    clip_norm: float = 1.0
    muon_beta: float = 0.95
    muon_rms: float = 0.2
    muon_shard_matrices: bool = True
    qk_clip_tau: Optional[float] = None


def optim_config_dict():
    """The optimizer ConfigDict with a comment on every key."""
    import ml_collections

    o = ml_collections.ConfigDict()
    o.name = "adamw"  # adamw | muon (Muon on hidden matrices, AdamW on embedding, head, router, norms)
    o.lr = 3e-4  # peak learning rate
    o.schedule = "wsd"  # wsd (warmup-stable-decay) | cosine | constant
    o.warmup_steps = 100  # linear warmup from 0
    o.total_steps = 1000  # length of the schedule (the run's step budget)
    o.decay_fraction = 0.2  # wsd: fraction of total_steps spent in the final linear decay
    o.min_lr_ratio = 0.1  # final lr as a fraction of the peak
    o.b1 = 0.9  # Adam β1
    o.b2 = 0.95  # Adam β2
    o.eps = 1e-8  # Adam ε
    o.weight_decay = 0.1  # decoupled weight decay on matrices (never on norms)
    o.decay_embeddings = True  # also decay the embedding and LM head
    o.clip_norm = 1.0  # global gradient-norm clip (0 = off)
    o.muon_beta = 0.95  # Muon momentum
    o.muon_rms = 0.2  # Muon update RMS matched to AdamW: scale √max(fan_in, fan_out)·0.2 (Moonlight)
    o.muon_shard_matrices = True  # NS on whole matrices spread over all devices (train/muon.py); False: XLA decides
    o.qk_clip_tau = ml_collections.FieldReference(None, field_type=float)  # MuonClip τ (Kimi K2: 100); None = off
    return o


def schedule(c: OptimConfig) -> optax.Schedule:
    """Learning-rate schedule by name."""
    end = c.lr * c.min_lr_ratio
    if c.schedule == "constant":
        return optax.join_schedules([optax.linear_schedule(0.0, c.lr, max(c.warmup_steps, 1)),
                                     optax.constant_schedule(c.lr)], [c.warmup_steps])
    if c.schedule == "cosine":
        return optax.warmup_cosine_decay_schedule(0.0, c.lr, max(c.warmup_steps, 1), max(c.total_steps, 2), end)
    if c.schedule == "wsd":
        decay = max(int(c.total_steps * c.decay_fraction), 1)
        stable = max(c.total_steps - c.warmup_steps - decay, 0)
        return optax.join_schedules(
            [optax.linear_schedule(0.0, c.lr, max(c.warmup_steps, 1)), optax.constant_schedule(c.lr),
             optax.linear_schedule(c.lr, end, decay)], [c.warmup_steps, c.warmup_steps + stable])
    raise ValueError(f"unknown lr schedule {c.schedule!r}; expected wsd | cosine | constant")


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


def make_optimizer(c: OptimConfig, params, logical) -> optax.GradientTransformation:
    """Clip → AdamW or Muon(+AdamW) with the schedule and decay mask."""
    lr = schedule(c)
    mask = decay_mask(params, logical, c)
    if c.name == "adamw":
        opt = optax.adamw(lr, c.b1, c.b2, c.eps, weight_decay=c.weight_decay, mask=mask)
    elif c.name == "muon":
        opt = muon_lib.muon(lr, muon_dims(params, logical), beta=c.muon_beta, weight_decay=c.weight_decay,
                            weight_decay_mask=mask, adam_b1=c.b1, adam_b2=c.b2, adam_eps=c.eps,
                            adam_weight_decay=c.weight_decay, consistent_rms=c.muon_rms,
                            specs=muon_specs(logical) if c.muon_shard_matrices else None)
    else:
        raise ValueError(f"unknown optimizer {c.name!r}; expected adamw | muon")
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
