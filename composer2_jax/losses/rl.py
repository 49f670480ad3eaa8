"""PPO-family policy losses for LLM RL: ratios, clipping, off-policy corrections, KL, entropy, aggregation.

Every function is a pure jnp function of arrays and masks; `policy_loss` composes them from a `PolicyLossConfig`.
The advantage (Dr. GRPO) comes from `composer2_jax.rl.advantages`.

Axis legend: B rows, T tokens, V vocab, N sequences. Token-level inputs are [B, T] with a mask [B, T]
(1 = a model token trained on, 0 = prompt, observation or padding). A row is one sequence unless
`segment_ids` [B, T] is given (packed rows, see `composer2_jax.rl.trajectory.pack_segments`): then each
(row, id ≥ 1) pair is one sequence and id 0 is padding. Sequence-level quantities (GSPO ratio, IcePop sequence
mask, seq-mean aggregation) are taken per sequence.

Three policies appear (AReaL naming): π_θ the policy being trained (`logp`), π_prox the proximal policy
the trainer recomputed for the batch before the update (`old_logp`), μ the behaviour policy whose
log-probs the sampler recorded (`behav_logp`); μ differs from π_prox through staleness (async RL) and
through train/inference numerics.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

Array = jax.Array

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "constant")
RATIO_LEVELS = ("token", "sequence")
BEHAV_WEIGHTS = ("none", "full", "truncated")
BEHAV_MASKS = ("none", "token", "sequence")


@dataclasses.dataclass(frozen=True)
class PolicyLossConfig:
    """Which pieces `policy_loss` composes; defaults are plain PPO-clip with a token-mean."""

    # Clip range of the ratio: [1 − ε_lo, 1 + ε_hi]. ε_hi > ε_lo is DAPO's clip-higher (0.2 / 0.28);
    # GSPO's sequence ratio wants far smaller values (3e-4 / 4e-4).
    clip_eps_low: float = 0.2
    clip_eps_high: float = 0.2  # ε_hi (see above)
    # Dual clip c > 1: for Â < 0 the objective is floored at c·Â, so a huge ratio cannot blow up the loss
    # (Ye et al. 2020). None = off.
    dual_clip_c: float | None = None
    # "token": r_t = π_θ/π_prox per token (PPO). "sequence": GSPO's length-normalised sequence ratio.
    ratio_level: str = "token"
    # "token-mean" (DAPO), "seq-mean-token-mean" (GRPO, GSPO), "constant" (Dr. GRPO: sum / (B·max_len)).
    aggregation: str = "token-mean"
    # The L of the "constant" normaliser; None = the batch's T.
    max_len: int | None = None
    # How w = π_prox/μ weights each token: "none" (assume μ = π_prox), "full" (decoupled PPO, AReaL),
    # "truncated" (min(w, C), truncated IS, Yao et al. 2025).
    behav_weight: str = "none"
    # C of the truncated importance weight.
    behav_trunc_c: float = 2.0
    # IcePop masking of tokens whose w falls outside [α, β]: "none", "token", or "sequence" (geometric-mean w).
    behav_mask: str = "none"
    # α and β of the IcePop band.
    behav_mask_low: float = 0.5
    behav_mask_high: float = 5.0  # β of the IcePop band (see above)
    # β of the k3 KL to a reference policy added to the loss (needs ref_logp); 0 = off.
    kl_coef: float = 0.0
    # λ of the asymmetric estimator: Â ← λ·Â where Â < 0, before everything else. 1 = the standard estimator;
    # 0 = positive samples only (PSR, Zhu et al. 2025 "The Surprising Effectiveness of Negative Reinforcement in
    # LLM Reasoning"); between, failures are pushed down less than successes are pulled up (Arnal et al. 2025,
    # "Asymmetric REINFORCE for off-policy RL"): a lower-variance update that sharpens rather than spreads π.
    negative_scale: float = 1.0
    # Coefficient of the entropy bonus (needs logits); 0 = off.
    entropy_coef: float = 0.0
    # Coefficient of the PPO value loss (needs values, old_values, returns); 0 = off (critic-free).
    value_coef: float = 0.0
    # ε of the clipped value loss; None = unclipped squared error.
    value_clip_eps: float | None = 0.2
    # Weight of the MTP self-distillation term on the rollout tokens (rl/services/rl_step.py): mean over depths of
    # KL(sg[p_main] ‖ q_k), trunk detached, so the drafting heads follow the moving policy; 0 = off (or no MTP).
    mtp_distill_weight: float = 0.0

    def __post_init__(self):
        _check_choice("aggregation", self.aggregation, AGGREGATIONS)
        _check_choice("ratio_level", self.ratio_level, RATIO_LEVELS)
        _check_choice("behav_weight", self.behav_weight, BEHAV_WEIGHTS)
        _check_choice("behav_mask", self.behav_mask, BEHAV_MASKS)
        if not (0.0 <= self.clip_eps_low < 1.0) or self.clip_eps_high < 0.0:
            raise ValueError(
                f"clip eps must satisfy 0 ≤ ε_lo < 1 and ε_hi ≥ 0, got ε_lo={self.clip_eps_low}, "
                f"ε_hi={self.clip_eps_high}"
            )
        if self.dual_clip_c is not None and self.dual_clip_c <= 1.0:
            raise ValueError(f"dual_clip_c must be > 1 (or None), got {self.dual_clip_c}")
        if self.negative_scale < 0.0:
            raise ValueError(f"negative_scale must be ≥ 0 (1 = the standard estimator), got {self.negative_scale}")
        if self.behav_trunc_c <= 0.0:
            raise ValueError(f"behav_trunc_c must be > 0, got {self.behav_trunc_c}")
        if not (0.0 < self.behav_mask_low <= 1.0 <= self.behav_mask_high):
            raise ValueError(
                f"IcePop band must satisfy 0 < α ≤ 1 ≤ β, got α={self.behav_mask_low}, β={self.behav_mask_high}"
            )
        if self.max_len is not None and self.max_len <= 0:
            raise ValueError(f"max_len must be a positive int (or None), got {self.max_len}")
        if self.value_clip_eps is not None and self.value_clip_eps <= 0.0:
            raise ValueError(f"value_clip_eps must be > 0 (or None), got {self.value_clip_eps}")
        if self.mtp_distill_weight < 0.0:
            raise ValueError(f"mtp_distill_weight must be ≥ 0 (0 = off), got {self.mtp_distill_weight}")


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    """ValueError naming the bad option and the accepted ones."""
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; expected one of {choices}")


def check_token_shapes(mask: Array, **arrays: Array | None) -> None:
    """ValueError unless mask is [B, T] and every given array has the same shape."""
    if mask.ndim != 2:
        raise ValueError(f"mask must be [B, T], got shape {tuple(mask.shape)}")
    for name, x in arrays.items():
        if x is not None and tuple(x.shape) != tuple(mask.shape):
            raise ValueError(f"{name} has shape {tuple(x.shape)}, expected the mask's [B, T] {tuple(mask.shape)}")


# ------------------------------------------------------------------------------------------ masked reductions


def _safe_div(num: Array, den: Array) -> Array:
    """num / den where den > 0, else 0 (no NaN in values or gradients)."""
    return jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), 0.0)


def masked_mean(x: Array, mask: Array) -> Array:
    """Σ mask·x / Σ mask over all tokens (0 when the mask is empty)."""
    m = mask.astype(jnp.float32)
    return _safe_div(jnp.sum(jnp.where(m > 0, x, 0.0) * m), jnp.sum(m))


def masked_max(x: Array, mask: Array) -> Array:
    """Max of x over masked-in tokens (0 when the mask is empty)."""
    return jnp.where(jnp.any(mask > 0), jnp.max(jnp.where(mask > 0, x, -jnp.inf)), 0.0)


def masked_min(x: Array, mask: Array) -> Array:
    """Min of x over masked-in tokens (0 when the mask is empty)."""
    return jnp.where(jnp.any(mask > 0), jnp.min(jnp.where(mask > 0, x, jnp.inf)), 0.0)


def sequence_index(mask: Array, segment_ids: Array | None = None) -> tuple[Array, int]:
    """[B, T] index of each token's sequence and the number N of sequence slots (row, or (row, segment))."""
    b, t = mask.shape
    rows_BT = jnp.broadcast_to(jnp.arange(b)[:, None], (b, t))
    if segment_ids is None:
        return rows_BT, b
    return rows_BT * (t + 1) + segment_ids.astype(jnp.int32), b * (t + 1)


def sequence_sums(x: Array, mask: Array, segment_ids: Array | None = None) -> tuple[Array, Array, Array]:
    """Per-sequence Σ mask·x [N], token counts [N], and each token's sequence index [B, T]."""
    m = mask.astype(jnp.float32)
    idx_BT, n = sequence_index(mask, segment_ids)
    sums_N = jax.ops.segment_sum((jnp.where(m > 0, x, 0.0) * m).ravel(), idx_BT.ravel(), num_segments=n)
    counts_N = jax.ops.segment_sum(m.ravel(), idx_BT.ravel(), num_segments=n)
    return sums_N, counts_N, idx_BT


def sequence_mean_per_token(x: Array, mask: Array, segment_ids: Array | None = None) -> Array:
    """[B, T]: every token gets the masked mean of x over its own sequence."""
    sums_N, counts_N, idx_BT = sequence_sums(x, mask, segment_ids)
    return _safe_div(sums_N, counts_N)[idx_BT]


def aggregate(
    loss: Array,
    mask: Array,
    mode: str,
    *,
    segment_ids: Array | None = None,
    max_len: int | None = None,
) -> Array:
    """Reduce a per-token loss [B, T] to a scalar.

    - "token-mean": Σ m·ℓ / Σ m — every token weighs the same (DAPO, Yu et al. 2025).
    - "seq-mean-token-mean": mean over sequences of (Σ_t m·ℓ / Σ_t m) — every sequence weighs the same
      (GRPO, Shao et al. 2024); empty sequences are left out of the mean.
    - "constant": Σ m·ℓ / (B·L), L = max_len or T — no length-dependent weights at all (Dr. GRPO, Liu et al.
      2025). With packed rows B·T is the batch's token capacity, still a constant.
    """
    _check_choice("aggregation", mode, AGGREGATIONS)
    check_token_shapes(mask, loss=loss, segment_ids=segment_ids)
    m = mask.astype(jnp.float32)
    if mode == "token-mean":
        return masked_mean(loss, m)
    if mode == "constant":
        length = loss.shape[1] if max_len is None else max_len
        return jnp.sum(jnp.where(m > 0, loss, 0.0) * m) / (loss.shape[0] * length)
    sums_N, counts_N, _ = sequence_sums(loss, m, segment_ids)
    nonempty_N = (counts_N > 0).astype(jnp.float32)
    return _safe_div(jnp.sum(_safe_div(sums_N, counts_N)), jnp.sum(nonempty_N))


# ---------------------------------------------------------------------------------------------- ratios, clipping


def log_ratio(logp: Array, old_logp: Array, mask: Array) -> Array:
    """[B, T] log π_θ − log π_prox on masked-in tokens, 0 elsewhere (so exp never sees padding garbage)."""
    return jnp.where(mask > 0, logp - old_logp, 0.0)


def gspo_sequence_ratio(
    logp: Array, old_logp: Array, mask: Array, segment_ids: Array | None = None
) -> Array:
    """[B, T] GSPO ratio s_i = (π_θ(y_i)/π_prox(y_i))^(1/|y_i|) = exp(mean_t log r_t), in token form.

    Zheng et al. 2025 (GSPO), GSPO-token: s_{i,t} = sg[s_i] · π_θ(y_t)/sg[π_θ(y_t)]. Its value is s_i at every
    token; its gradient is s_i·∇log π_θ(y_t), so with "seq-mean-token-mean" aggregation the gradient equals the
    sequence-level GSPO gradient s_i·(1/|y_i|)·Σ_t ∇log π_θ(y_t).
    """
    mean_log_BT = sequence_mean_per_token(log_ratio(logp, old_logp, mask), mask, segment_ids)
    s_BT = jnp.exp(jax.lax.stop_gradient(mean_log_BT))
    return s_BT * jnp.exp(logp - jax.lax.stop_gradient(logp))


def clipped_surrogate(
    ratio: Array, advantages: Array, eps_low: float, eps_high: float, dual_clip_c: float | None = None
) -> Array:
    """Per-token PPO-clip loss −min(r·Â, clip(r, 1−ε_lo, 1+ε_hi)·Â), for Â < 0 floored: −max(·, c·Â).

    PPO: Schulman et al. 2017. Asymmetric ε_lo/ε_hi (clip-higher): DAPO, Yu et al. 2025.
    Dual clip: Ye et al. 2020 ("Mastering Complex Control in MOBA Games with Deep RL"), c > 1.
    """
    obj = jnp.minimum(ratio * advantages, jnp.clip(ratio, 1.0 - eps_low, 1.0 + eps_high) * advantages)
    if dual_clip_c is not None:
        obj = jnp.where(advantages < 0, jnp.maximum(obj, dual_clip_c * advantages), obj)
    return -obj


def clip_fractions(
    ratio: Array,
    advantages: Array,
    mask: Array,
    eps_low: float,
    eps_high: float,
    dual_clip_c: float | None = None,
) -> dict[str, Array]:
    """Fractions of masked-in tokens whose gradient the low / high / dual clip cuts off."""
    low = (ratio < 1.0 - eps_low) & (advantages < 0)
    high = (ratio > 1.0 + eps_high) & (advantages > 0)
    out = {
        "clip_frac": masked_mean((low | high).astype(jnp.float32), mask),
        "clip_frac_low": masked_mean(low.astype(jnp.float32), mask),
        "clip_frac_high": masked_mean(high.astype(jnp.float32), mask),
    }
    if dual_clip_c is not None:
        out["clip_frac_dual"] = masked_mean(((ratio > dual_clip_c) & (advantages < 0)).astype(jnp.float32), mask)
    return out


# ----------------------------------------------------------------------------------- behaviour-policy corrections


def truncated_is_weight(behav_log_ratio: Array, c: float = 2.0) -> Array:
    """[B, T] min(π_prox/μ, C), stop-gradient (truncated IS, Yao et al. 2025 "Your efficient RL framework
    secretly brings you off-policy RL training"; C = 2)."""
    return jax.lax.stop_gradient(jnp.minimum(jnp.exp(behav_log_ratio), c))


def icepop_token_mask(behav_log_ratio: Array, low: float = 0.5, high: float = 5.0) -> Array:
    """[B, T] 1 where α ≤ π_prox/μ ≤ β, else 0 (IcePop, Ling Team 2025, Ring-1T: tokens whose train/inference
    probabilities disagree too much get no gradient)."""
    w = jnp.exp(behav_log_ratio)
    return ((w >= low) & (w <= high)).astype(jnp.float32)


def icepop_sequence_mask(
    behav_log_ratio: Array,
    mask: Array,
    low: float = 0.5,
    high: float = 5.0,
    segment_ids: Array | None = None,
) -> Array:
    """[B, T] 1 on sequences whose geometric-mean ratio exp(mean_t log(π_prox/μ)) lies in [α, β], else 0.

    Sequence-level masked IS with the length-normalised (geometric mean) ratio, as in Liu, Yao et al. 2025
    ("When speed kills stability"); one bad token does not mask a long sequence, a drifted sequence is dropped.
    """
    mean_log_BT = sequence_mean_per_token(behav_log_ratio, mask, segment_ids)
    return icepop_token_mask(mean_log_BT, low, high)


# ------------------------------------------------------------------------------------------- KL, entropy, value


def kl_k1(logp: Array, ref_logp: Array) -> Array:
    """k1 = ℓ = log π − log π_ref: unbiased per-sample KL(π‖π_ref) (Schulman 2020, "Approximating KL")."""
    return logp - ref_logp


def kl_k3(logp: Array, ref_logp: Array) -> Array:
    """k3 = e^(−ℓ) − 1 + ℓ, ℓ = log π − log π_ref: unbiased, ≥ 0 (Schulman 2020); the KL term of GRPO."""
    ell = logp - ref_logp
    return jnp.expm1(-ell) + ell


def entropy_from_logits(logits: Array) -> Array:
    """[B, T] entropy H = −Σ_v p_v log p_v of softmax(logits [B, T, V]), fp32, stable for huge or −inf logits."""
    z = logits.astype(jnp.float32)
    logp_BTV = jax.nn.log_softmax(z, axis=-1)
    p_BTV = jnp.exp(logp_BTV)
    return -jnp.sum(p_BTV * jnp.where(p_BTV > 0, logp_BTV, 0.0), axis=-1)


def clipped_value_loss(
    values: Array, old_values: Array, returns: Array, clip_eps: float | None = 0.2
) -> Array:
    """[B, T] ½·max((V − R)², (V_old + clip(V − V_old, −ε, ε) − R)²); ε None = ½(V − R)².

    PPO value clipping as in OpenAI baselines (Schulman et al. 2017); studied by Andrychowicz et al. 2021.
    """
    unclipped = jnp.square(values - returns)
    if clip_eps is None:
        return 0.5 * unclipped
    v_clipped = old_values + jnp.clip(values - old_values, -clip_eps, clip_eps)
    return 0.5 * jnp.maximum(unclipped, jnp.square(v_clipped - returns))


# --------------------------------------------------------------------------------------------------- the entry


def _behaviour_terms(
    old_logp: Array, behav_logp: Array | None, mask: Array, cfg: PolicyLossConfig, segment_ids
) -> tuple[Array, Array, Array]:
    """Log w = log(π_prox/μ) [B, T], the per-token weight applied to the surrogate, and the IcePop keep mask."""
    if behav_logp is None:
        behav_lr = jnp.zeros_like(old_logp)
    else:
        behav_lr = jax.lax.stop_gradient(log_ratio(old_logp, behav_logp, mask))
    if cfg.behav_weight == "full":
        weight = jnp.exp(behav_lr)
    elif cfg.behav_weight == "truncated":
        weight = truncated_is_weight(behav_lr, cfg.behav_trunc_c)
    else:
        weight = jnp.ones_like(behav_lr)
    if cfg.behav_mask == "token":
        keep = icepop_token_mask(behav_lr, cfg.behav_mask_low, cfg.behav_mask_high)
    elif cfg.behav_mask == "sequence":
        keep = icepop_sequence_mask(behav_lr, mask, cfg.behav_mask_low, cfg.behav_mask_high, segment_ids)
    else:
        keep = jnp.ones_like(behav_lr)
    return behav_lr, weight, keep


class ValueInputs(NamedTuple):
    """The value head's inputs of the PPO value loss, each [B, T]."""

    values: Array  # V_t of the model being trained
    old_values: Array  # V_old,t recorded before the update (the clip's centre)
    returns: Array  # R_t, the value target


class RegulariserInputs(NamedTuple):
    """The optional inputs of the regularising terms (KL to π_ref, entropy bonus, value loss); None: not given."""

    ref_logp: Array | None = None  # [B, T] log π_ref(token): needed when cfg.kl_coef > 0; adds KL metrics
    logits: Array | None = None  # [B, T, V] π_θ logits, for H(π_θ) when `entropy` is None
    entropy: Array | None = None  # [B, T] H(π_θ) per token (from chunked logits, losses/lm.py)
    value: ValueInputs | None = None  # needed when cfg.value_coef > 0


def policy_loss(
    logp: Array,
    old_logp: Array,
    behav_logp: Array | None,
    advantages: Array,
    mask: Array,
    cfg: PolicyLossConfig,
    *,
    segment_ids: Array | None = None,
    extras: RegulariserInputs = RegulariserInputs(),
) -> tuple[Array, dict[str, Array]]:
    """PPO-family loss, configured by `cfg`; returns (scalar loss, metrics).

    L = agg_t[ w_t · keep_t · −min(r_t·Â_t, clip(r_t, 1−ε_lo, 1+ε_hi)·Â_t) ]       (PPO / DAPO / dual clip)
    (Â_t scaled by λ = cfg.negative_scale where it is negative: the asymmetric estimator)
        + β·agg_t[k3_t] − c_H·agg_t[H_t] + c_V·agg_t[value loss_t]
    r_t = π_θ/π_prox per token, or GSPO's sequence ratio (Zheng et al. 2025) with ratio_level="sequence".
    w_t = π_prox/μ (decoupled PPO: (π_prox/μ)·min(r·Â, clip(r)·Â), Fu et al. 2025 AReaL, after Hilton et al.
    2022), min(π_prox/μ, C) (truncated IS), or 1. keep_t is the IcePop mask (token or sequence level); masked
    tokens stay in the normaliser, so masking lowers the gradient instead of reweighting the kept tokens.
    w and keep are constants (stop-gradient): they depend only on recorded log-probs.

    Args:
      logp: [B, T] log π_θ(token) of the policy being trained (the only input gradients flow into).
      old_logp: [B, T] log π_prox(token), recomputed by the trainer before the update.
      behav_logp: [B, T] log μ(token) recorded by the sampler, or None (μ = π_prox).
      advantages: [B, T] Â per token (sequence advantages broadcast over the sequence's trained tokens).
      mask: [B, T] 1 on model tokens trained on, 0 on prompt / observations / padding.
      cfg: a PolicyLossConfig.
      segment_ids: [B, T] int, packed rows (id ≥ 1 per segment, 0 padding); None = one sequence per row.
      extras: the regularisers' inputs (`RegulariserInputs`):
        ref_logp: [B, T] log π_ref(token), needed when cfg.kl_coef > 0; adds KL metrics when given.
        logits: [B, T, V] π_θ logits; or `entropy` [B, T], H(π_θ) per token (from chunked logits, losses/lm.py).
          One of them is needed when cfg.entropy_coef > 0; either adds the entropy metric when given.
        value: `ValueInputs(values, old_values, returns)`, each [B, T], needed when cfg.value_coef > 0.

    Returns:
      loss: scalar fp32.
      metrics: dict of scalars (all stop-gradient): loss terms, clip fractions, ratio and π_prox/μ statistics,
        the IcePop masked fraction, KL estimates (k1/k3, to π_prox and, with ref_logp, to π_ref), entropy.
    """
    value = extras.value or ValueInputs(None, None, None)
    check_token_shapes(mask, logp=logp, old_logp=old_logp, behav_logp=behav_logp, advantages=advantages,
                       segment_ids=segment_ids, ref_logp=extras.ref_logp, **value._asdict(), entropy=extras.entropy)
    if extras.entropy is None and extras.logits is not None:
        _check_logits(extras.logits, mask)
        extras = extras._replace(entropy=entropy_from_logits(extras.logits))
    _check_optional_inputs(cfg, extras)
    m = mask.astype(jnp.float32)
    logp, old_logp, advantages = (x.astype(jnp.float32) for x in (logp, old_logp, advantages))
    if cfg.negative_scale != 1.0:
        advantages = jnp.where(advantages < 0, cfg.negative_scale * advantages, advantages)
    agg = {"mode": cfg.aggregation, "segment_ids": segment_ids, "max_len": cfg.max_len}

    with jax.named_scope("ratio"):
        if cfg.ratio_level == "sequence":
            ratio = gspo_sequence_ratio(logp, old_logp, m, segment_ids)
        else:
            ratio = jnp.exp(log_ratio(logp, old_logp, m))
    with jax.named_scope("behaviour_correction"):
        behav_lr, weight, keep = _behaviour_terms(old_logp, behav_logp, m, cfg, segment_ids)
    with jax.named_scope("surrogate"):
        pg_BT = clipped_surrogate(ratio, advantages, cfg.clip_eps_low, cfg.clip_eps_high, cfg.dual_clip_c)
        pg_loss = aggregate(weight * keep * pg_BT, m, **agg)
    with jax.named_scope("regularisers"):
        reg_loss, reg_metrics = _regularisers(logp, m, cfg, agg, extras)
    loss = pg_loss + reg_loss

    metrics = {"loss": loss, "pg_loss": pg_loss, **reg_metrics}
    metrics.update(_policy_metrics(ratio, advantages, behav_lr, keep, logp, old_logp, m, cfg))
    return loss, jax.lax.stop_gradient(metrics)


def _check_logits(logits: Array, mask: Array):
    """ValueError unless logits are [B, T, V] over the mask's [B, T]."""
    if tuple(logits.shape[:2]) != tuple(mask.shape):
        raise ValueError(f"logits have shape {tuple(logits.shape)}, expected [B, T, V] with [B, T]={mask.shape}")


def _check_optional_inputs(cfg: PolicyLossConfig, extras: RegulariserInputs):
    """ValueError when a configured term lacks its input (KL: ref_logp, entropy: logits or entropy, value: values…)."""
    if cfg.kl_coef > 0 and extras.ref_logp is None:
        raise ValueError(f"kl_coef={cfg.kl_coef} needs ref_logp [B, T]; got None")
    if cfg.entropy_coef > 0 and extras.entropy is None:
        raise ValueError(f"entropy_coef={cfg.entropy_coef} needs logits [B, T, V] or entropy [B, T]; got None")
    if cfg.value_coef > 0 and (extras.value is None or any(x is None for x in extras.value)):
        raise ValueError(f"value_coef={cfg.value_coef} needs values, old_values and returns [B, T] "
                         f"(extras.value = ValueInputs(...)); got {extras.value}")


def _regularisers(logp, mask, cfg: PolicyLossConfig, agg: dict, extras: RegulariserInputs):
    """β·agg[k3] − c_H·agg[H] + c_V·agg[value loss], and the metrics of whichever inputs were given
    (`extras.entropy` already filled from the logits when only those were given)."""
    loss, metrics = jnp.zeros((), jnp.float32), {}
    sg_logp = jax.lax.stop_gradient(logp)
    ref_logp, entropy = extras.ref_logp, extras.entropy
    if ref_logp is not None:
        ref_logp = ref_logp.astype(jnp.float32)
        metrics["kl_ref_k1"] = masked_mean(kl_k1(sg_logp, ref_logp), mask)
        metrics["kl_ref_k3"] = masked_mean(kl_k3(sg_logp, ref_logp), mask)
        if cfg.kl_coef > 0:
            metrics["kl_loss"] = aggregate(kl_k3(logp, ref_logp), mask, **agg)
            loss = loss + cfg.kl_coef * metrics["kl_loss"]
    if entropy is not None:
        metrics["entropy"] = aggregate(entropy, mask, **agg)
        if cfg.entropy_coef > 0:
            loss = loss - cfg.entropy_coef * metrics["entropy"]
    if cfg.value_coef > 0:
        metrics["value_loss"] = aggregate(clipped_value_loss(*extras.value, cfg.value_clip_eps), mask, **agg)
        loss = loss + cfg.value_coef * metrics["value_loss"]
    return loss, metrics


def _policy_metrics(ratio, advantages, behav_lr, keep, logp, old_logp, mask, cfg: PolicyLossConfig):
    """Clip fractions, ratio and π_prox/μ statistics, IcePop/TIS fractions, KL(π_θ‖π_prox) estimates."""
    ratio, logp = jax.lax.stop_gradient(ratio), jax.lax.stop_gradient(logp)
    behav_w = jnp.exp(behav_lr)
    return {
        **clip_fractions(ratio, advantages, mask, cfg.clip_eps_low, cfg.clip_eps_high, cfg.dual_clip_c),
        **_stats("ratio", ratio, mask),
        **_stats("behav_ratio", behav_w, mask),
        "behav_masked_frac": masked_mean(1.0 - keep, mask),
        "behav_truncated_frac": masked_mean((behav_w > cfg.behav_trunc_c).astype(jnp.float32), mask),
        "kl_old_k1": masked_mean(kl_k1(logp, old_logp), mask),
        "kl_old_k3": masked_mean(kl_k3(logp, old_logp), mask),
    }


def _stats(name: str, x: Array, mask: Array) -> dict[str, Array]:
    """{name_mean, name_max, name_min} over masked-in tokens."""
    return {
        f"{name}_mean": masked_mean(x, mask),
        f"{name}_max": masked_max(x, mask),
        f"{name}_min": masked_min(x, mask),
    }
