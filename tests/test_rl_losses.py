"""PPO-family losses and advantage estimators: hand-computed values, a naive per-token loop reference, equivalences."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from composer2_jax.losses import rl
from composer2_jax.losses.rl import PolicyLossConfig, RegulariserInputs, ValueInputs, policy_loss
from composer2_jax.rl import advantages as adv_lib
from tests.tolerances import FP32_FN

LN2 = math.log(2.0)


def close(actual, expected, tol=FP32_FN):
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64), **tol)


# ------------------------------------------------------------------------------------------------ aggregation

LOSS = jnp.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 0.0, 0.0]])
MASK = jnp.array([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])


def test_aggregate_token_mean_by_hand():
    # (1 + 2 + 3 + 5 + 6) / 5 = 17 / 5
    close(rl.aggregate(LOSS, MASK, "token-mean"), 3.4)


def test_aggregate_seq_mean_token_mean_by_hand():
    # ((1 + 2 + 3)/3 + (5 + 6)/2) / 2 = (2 + 5.5) / 2
    close(rl.aggregate(LOSS, MASK, "seq-mean-token-mean"), 3.75)


def test_aggregate_constant_by_hand():
    # 17 / (B·T) = 17 / 8; with max_len = 10: 17 / 20
    close(rl.aggregate(LOSS, MASK, "constant"), 2.125)
    close(rl.aggregate(LOSS, MASK, "constant", max_len=10), 0.85)


def test_aggregate_seq_mean_with_packed_segments_by_hand():
    # row 0 holds segments 1 = [1, 2] and 2 = [3, 5]; row 1 holds segment 1 = [7] then padding.
    # ((1 + 2)/2 + (3 + 5)/2 + 7/1) / 3 = (1.5 + 4 + 7) / 3
    loss = jnp.array([[1.0, 2.0, 3.0, 5.0], [7.0, 9.0, 9.0, 9.0]])
    mask = jnp.array([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])
    seg = jnp.array([[1, 1, 2, 2], [1, 0, 0, 0]])
    close(rl.aggregate(loss, mask, "seq-mean-token-mean", segment_ids=seg), 12.5 / 3)


def test_aggregate_skips_empty_sequences_and_empty_mask():
    mask = jnp.array([[1.0, 1.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    close(rl.aggregate(LOSS, mask, "seq-mean-token-mean"), 2.0)  # only row 0: (1 + 2 + 3) / 3
    close(rl.aggregate(LOSS, jnp.zeros_like(MASK), "token-mean"), 0.0)


def test_aggregate_rejects_unknown_mode_and_bad_shapes():
    with pytest.raises(ValueError, match="unknown aggregation 'sum'"):
        rl.aggregate(LOSS, MASK, "sum")
    with pytest.raises(ValueError, match=r"loss has shape \(2, 3\)"):
        rl.aggregate(LOSS[:, :3], MASK, "token-mean")
    with pytest.raises(ValueError, match=r"mask must be \[B, T\]"):
        rl.aggregate(LOSS, MASK[0], "token-mean")


# ------------------------------------------------------------------------------------------- clipped surrogate

RATIO = jnp.array([0.5, 0.9, 1.0, 1.3, 1.5, 4.0])
ADV = jnp.array([-1.0, 2.0, 1.0, 2.0, -1.0, -1.0])


def test_clipped_surrogate_asymmetric_by_hand():
    # ε_lo = 0.2, ε_hi = 0.28: clip range [0.8, 1.28]; loss = −min(r·A, clip(r)·A)
    # r=0.5 A=−1: min(−0.5, −0.8) = −0.8 → 0.8      r=0.9 A=2: min(1.8, 1.8) → −1.8
    # r=1.0 A=1: → −1                                r=1.3 A=2: min(2.6, 2.56) → −2.56
    # r=1.5 A=−1: min(−1.5, −1.28) → 1.5             r=4.0 A=−1: min(−4, −1.28) → 4
    out = rl.clipped_surrogate(RATIO, ADV, 0.2, 0.28)
    close(out, [0.8, -1.8, -1.0, -2.56, 1.5, 4.0])


def test_dual_clip_by_hand():
    # c = 3 floors the objective at c·A for A < 0: r=4, A=−1: max(−4, −3) = −3 → loss 3; others unchanged
    # (r=1.5: max(−1.5, −3) = −1.5).
    out = rl.clipped_surrogate(RATIO, ADV, 0.2, 0.28, dual_clip_c=3.0)
    close(out, [0.8, -1.8, -1.0, -2.56, 1.5, 3.0])


def test_clip_fractions_by_hand():
    # low: r < 0.8 and A < 0 → token 0; high: r > 1.28 and A > 0 → token 3; dual: r > 3 and A < 0 → token 5.
    f = rl.clip_fractions(RATIO[None], ADV[None], jnp.ones((1, 6)), 0.2, 0.28, 3.0)
    close(f["clip_frac_low"], 1 / 6)
    close(f["clip_frac_high"], 1 / 6)
    close(f["clip_frac"], 2 / 6)
    close(f["clip_frac_dual"], 1 / 6)


# --------------------------------------------------------------------------------------- behaviour corrections


def test_decoupled_ppo_and_truncated_is_by_hand():
    # One token, r = π_θ/π_prox = 1.1 (inside [0.8, 1.2]), A = 1, w = π_prox/μ = 2.
    # decoupled: −w·min(r·A, clip(r)·A) = −2·1.1 = −2.2
    # truncated at C = 1.5: −1.5·1.1 = −1.65;  no correction: −1.1
    logp, old, behav = (jnp.log(jnp.array([[p]])) for p in (0.55, 0.5, 0.25))
    a, m = jnp.ones((1, 1)), jnp.ones((1, 1))
    full, _ = policy_loss(logp, old, behav, a, m, PolicyLossConfig(behav_weight="full"))
    trunc, met = policy_loss(logp, old, behav, a, m, PolicyLossConfig(behav_weight="truncated", behav_trunc_c=1.5))
    plain, _ = policy_loss(logp, old, behav, a, m, PolicyLossConfig())
    close(full, -2.2)
    close(trunc, -1.65)
    close(plain, -1.1)
    close(met["behav_ratio_mean"], 2.0)
    close(met["behav_truncated_frac"], 1.0)


def test_icepop_token_and_sequence_masks_by_hand():
    # w = π_prox/μ per token; band [0.5, 5].
    # token: row 0 w = [0.25, 4] → [0, 1]; row 1 w = [4, 9] → [1, 0]
    # sequence, geometric mean: row 0 √(0.25·4) = 1 → kept; row 1 √(4·9) = 6 → masked
    log_w = jnp.log(jnp.array([[0.25, 4.0], [4.0, 9.0]]))
    mask = jnp.ones((2, 2))
    close(rl.icepop_token_mask(log_w), [[0.0, 1.0], [1.0, 0.0]])
    close(rl.icepop_sequence_mask(log_w, mask), [[1.0, 1.0], [0.0, 0.0]])


def test_icepop_masked_tokens_stay_in_the_normaliser():
    # Two tokens, r = 1, A = 1, w = [1, 9]: token 1 masked. token-mean: (−1·1 + 0) / 2 = −0.5 (not −1).
    logp = old = jnp.zeros((1, 2))
    behav = -jnp.log(jnp.array([[1.0, 9.0]]))
    loss, met = policy_loss(logp, old, behav, jnp.ones((1, 2)), jnp.ones((1, 2)),
                            PolicyLossConfig(behav_mask="token"))
    close(loss, -0.5)
    close(met["behav_masked_frac"], 0.5)


def test_truncated_is_weight_by_hand():
    # min(w, 2) for w = [0.5, 2, 3]
    close(rl.truncated_is_weight(jnp.log(jnp.array([0.5, 2.0, 3.0]))), [0.5, 2.0, 2.0])


def test_decoupled_equals_plain_ppo_when_behaviour_is_proximal():
    logp, old, _, a, m, _ = random_batch(0)

    def loss_and_grad(behav, cfg):
        return jax.value_and_grad(lambda x: policy_loss(x, old, behav, a, m, cfg)[0])(logp)

    l0, g0 = loss_and_grad(None, PolicyLossConfig(clip_eps_high=0.28))
    for weight in ("full", "truncated"):
        for mask_mode in ("none", "token", "sequence"):
            cfg = PolicyLossConfig(behav_weight=weight, behav_mask=mask_mode, clip_eps_high=0.28)
            l1, g1 = loss_and_grad(old, cfg)
            close(l1, l0)
            close(g1, g0)


def test_decoupled_gradient_is_behaviour_weighted_plain_gradient():
    # ∂/∂logp_t of (π_prox/μ)_t·ℓ_t = w_t·∂ℓ_t: the weight is a constant per token.
    logp, old, behav, a, m, _ = random_batch(1)
    g_dec = jax.grad(lambda x: policy_loss(x, old, behav, a, m, PolicyLossConfig(behav_weight="full"))[0])(logp)
    g_plain = jax.grad(lambda x: policy_loss(x, old, None, a, m, PolicyLossConfig())[0])(logp)
    w = jnp.exp(jnp.where(m > 0, old - behav, 0.0))
    close(g_dec, w * g_plain)


# ------------------------------------------------------------------------------------------------------- GSPO


def test_gspo_sequence_ratio_and_loss_by_hand():
    # row 0: log r = [0.1, 0.3] → s = e^0.2 = 1.221403, A = 1, ε = 0.2: −min(1.2214, 1.2) = −1.2
    # row 1: log r = [−0.1, 0.0, pad] → s = e^−0.05 = 0.951229, A = −2:
    #        −min(−1.902459, −1.902459) = 1.902459 (inside the clip range)
    # seq-mean-token-mean: (−1.2 + 1.902459) / 2 = 0.3512295
    logp = jnp.array([[0.1, 0.3, 0.0], [-0.1, 0.0, 5.0]])
    old = jnp.zeros((2, 3))
    mask = jnp.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    a = jnp.array([[1.0, 1.0, 0.0], [-2.0, -2.0, 0.0]])
    s = rl.gspo_sequence_ratio(logp, old, mask)
    close(s[:, :2], [[1.2214028, 1.2214028], [0.9512294, 0.9512294]])
    cfg = PolicyLossConfig(ratio_level="sequence", aggregation="seq-mean-token-mean")
    loss, met = policy_loss(logp, old, None, a, mask, cfg)
    close(loss, 0.3512295)
    close(met["clip_frac_high"], 0.5)  # both tokens of row 0 are clipped


def test_gspo_gradient_equals_sequence_level_gspo():
    # GSPO (Zheng et al. 2025): J = mean_i min(s_i·A_i, clip(s_i)·A_i), s_i = exp(mean_t log r), full autodiff.
    logp, old, _, _, m, seg = random_batch(2, packed=True)
    seq_adv = jnp.array([0.7, -1.3, 0.4, 2.0, -0.5, 1.1, -0.9, 0.3])  # one per (row, segment) slot used below
    idx, n = rl.sequence_index(m, seg)
    a = jnp.where(m > 0, seq_adv[idx % 8], 0.0)
    eps = 0.05

    def reference(x):
        sums, counts, idx_ = rl.sequence_sums(x - old, m, seg)
        s = jnp.exp(jnp.where(counts > 0, sums / jnp.maximum(counts, 1), 0.0))
        a_n = jax.ops.segment_max(jnp.where(m > 0, a, -jnp.inf).ravel(), idx_.ravel(), num_segments=n)
        obj = jnp.minimum(s * a_n, jnp.clip(s, 1 - eps, 1 + eps) * a_n)
        return -jnp.sum(jnp.where(counts > 0, obj, 0.0)) / jnp.sum(counts > 0)

    cfg = PolicyLossConfig(ratio_level="sequence", aggregation="seq-mean-token-mean", clip_eps_low=eps,
                           clip_eps_high=eps)
    l_ref, g_ref = jax.value_and_grad(reference)(logp)
    l, g = jax.value_and_grad(lambda x: policy_loss(x, old, None, a, m, cfg, segment_ids=seg)[0])(logp)
    close(l, l_ref)
    close(g, g_ref)


# ----------------------------------------------------------------------------------------- KL, entropy, value


def test_kl_estimators_by_hand():
    # ℓ = log 2: k1 = 0.693147, k3 = e^−ℓ − 1 + ℓ = 0.5 − 1 + 0.693147 = 0.193147
    # ℓ = −log 2: k1 = −0.693147, k3 = 2 − 1 − 0.693147 = 0.306853; ℓ = 0: both 0
    ell = jnp.array([LN2, -LN2, 0.0])
    close(rl.kl_k1(ell, jnp.zeros(3)), [LN2, -LN2, 0.0])
    close(rl.kl_k3(ell, jnp.zeros(3)), [0.5 - 1 + LN2, 1 - LN2, 0.0])


def test_kl_in_loss_by_hand():
    # r = 1, A = 0 → pg 0; ℓ = log π − log π_ref = log 2 on both tokens: loss = β·k3 = 0.1·0.193147
    logp = jnp.zeros((1, 2))
    ref = jnp.full((1, 2), -LN2)
    loss, met = policy_loss(logp, logp, None, jnp.zeros((1, 2)), jnp.ones((1, 2)), PolicyLossConfig(kl_coef=0.1),
                            extras=RegulariserInputs(ref_logp=ref))
    close(loss, 0.1 * (LN2 - 0.5))
    close(met["kl_ref_k1"], LN2)
    close(met["kl_ref_k3"], LN2 - 0.5)


def test_entropy_by_hand_and_stable():
    # uniform over 2 → ln 2; a −inf logit does not count; huge equal logits still ln 2; uniform over 4 → ln 4
    logits = jnp.array([[[0.0, 0.0, -jnp.inf, -jnp.inf], [1e4, 1e4, -jnp.inf, -jnp.inf], [3.0, 3.0, 3.0, 3.0]]])
    close(rl.entropy_from_logits(logits), [[LN2, LN2, 2 * LN2]])
    g = jax.grad(lambda z: jnp.sum(rl.entropy_from_logits(z)))(logits)
    assert bool(jnp.all(jnp.isfinite(g)))


def test_entropy_matches_naive_and_is_fp32_from_bf16():
    z = np.random.default_rng(3).normal(size=(2, 3, 7)) * 3
    naive = np.zeros((2, 3))
    for b in range(2):
        for t in range(3):
            p = np.exp(z[b, t] - z[b, t].max())
            p /= p.sum()
            naive[b, t] = -sum(pi * math.log(pi) for pi in p)
    close(rl.entropy_from_logits(jnp.asarray(z, jnp.float32)), naive)
    out = rl.entropy_from_logits(jnp.asarray(z, jnp.bfloat16))
    assert out.dtype == jnp.float32


def test_clipped_value_loss_by_hand():
    # V=1.5, V_old=1, R=2, ε=0.2: unclipped (1.5−2)² = 0.25; clipped (1 + 0.2 − 2)² = 0.64 → ½·0.64 = 0.32
    # V=0.9, V_old=1, R=0: (0.9)² = 0.81 both ways → 0.405; ε None: ½·(1.5−2)² = 0.125
    v, v_old, r = jnp.array([1.5, 0.9]), jnp.array([1.0, 1.0]), jnp.array([2.0, 0.0])
    close(rl.clipped_value_loss(v, v_old, r, 0.2), [0.32, 0.405])
    close(rl.clipped_value_loss(v, v_old, r, None), [0.125, 0.405])


def test_value_loss_in_policy_loss_by_hand():
    # pg: r = 1, A = 0 → 0; value loss token-mean over 2 tokens: (0.32 + 0.405)/2 = 0.3625; ×0.5
    z = jnp.zeros((1, 2))
    cfg = PolicyLossConfig(value_coef=0.5)
    value = ValueInputs(values=jnp.array([[1.5, 0.9]]), old_values=jnp.ones((1, 2)), returns=jnp.array([[2.0, 0.0]]))
    loss, met = policy_loss(z, z, None, z, jnp.ones((1, 2)), cfg, extras=RegulariserInputs(value=value))
    close(met["value_loss"], 0.3625)
    close(loss, 0.18125)


# ------------------------------------------------------------------------------------ naive per-token reference


def random_batch(seed, b=4, t=7, packed=False):
    """logp, old, behav, advantages, mask [B, T] with big enough gaps that every clip and mask fires."""
    rng = np.random.default_rng(seed)
    logp = -rng.uniform(0.1, 3.0, (b, t))
    old = logp + rng.normal(0, 0.35, (b, t))
    behav = old + rng.normal(0, 0.9, (b, t))
    a = rng.normal(0, 1.0, (b, t))
    mask = (rng.uniform(size=(b, t)) < 0.8).astype(np.float64)
    mask[:, 0] = 1.0
    mask[-1] = 0.0  # an empty row
    seg = None
    if packed:
        seg = np.array([[1, 1, 1, 2, 2, 2, 2], [1, 1, 2, 2, 3, 3, 0], [1, 1, 1, 1, 1, 1, 1], [0] * 7])
        mask = mask * (seg > 0)
        seg = jnp.asarray(seg)
    logp, old, behav, a, mask = (jnp.asarray(x, jnp.float32) for x in (logp, old, behav, a, mask))
    return logp, old, behav, a, mask, seg


def naive_policy_loss(logp, old, behav, adv, mask, cfg, seg=None, ref=None, logits=None, values=None):
    """Per-token Python loop over the written-out formulas (float64); returns (loss, some metrics)."""
    logp, old, adv, mask = (np.asarray(x, np.float64) for x in (logp, old, adv, mask))
    behav = old if behav is None else np.asarray(behav, np.float64)
    b_, t_ = mask.shape
    seqs = {}
    for b in range(b_):
        for t in range(t_):
            if mask[b, t] > 0:
                seqs.setdefault((b, 0 if seg is None else int(seg[b, t])), []).append(t)
    lo, hi = 1 - cfg.clip_eps_low, 1 + cfg.clip_eps_high
    pg, kl, ent, val, n_low, n_high, n_masked, ratios = {}, {}, {}, {}, 0, 0, 0, []
    for (b, _), ts in seqs.items():
        seq_ratio = math.exp(sum(logp[b, t] - old[b, t] for t in ts) / len(ts))
        seq_w = math.exp(sum(old[b, t] - behav[b, t] for t in ts) / len(ts))
        for t in ts:
            r = seq_ratio if cfg.ratio_level == "sequence" else math.exp(logp[b, t] - old[b, t])
            a = adv[b, t] * (cfg.negative_scale if adv[b, t] < 0 else 1.0)
            obj = min(r * a, min(max(r, lo), hi) * a)
            if cfg.dual_clip_c is not None and a < 0:
                obj = max(obj, cfg.dual_clip_c * a)
            w = math.exp(old[b, t] - behav[b, t])
            weight = {"none": 1.0, "full": w, "truncated": min(w, cfg.behav_trunc_c)}[cfg.behav_weight]
            probe = {"none": 1.0, "token": w, "sequence": seq_w}[cfg.behav_mask]
            keep = float(cfg.behav_mask_low <= probe <= cfg.behav_mask_high)
            pg[(b, t)] = -obj * weight * keep
            n_low += r < lo and a < 0
            n_high += r > hi and a > 0
            n_masked += keep == 0
            ratios.append(r)
            if ref is not None:
                ell = logp[b, t] - float(ref[b, t])
                kl[(b, t)] = math.exp(-ell) - 1 + ell
            if logits is not None:
                z = np.asarray(logits[b, t], np.float64)
                p = np.exp(z - z.max())
                p /= p.sum()
                ent[(b, t)] = -float(np.sum(p * np.log(p)))
            if cfg.value_coef:
                v, v_old, ret = (float(x[b, t]) for x in values)
                v_clip = v_old + min(max(v - v_old, -cfg.value_clip_eps), cfg.value_clip_eps)
                val[(b, t)] = 0.5 * max((v - ret) ** 2, (v_clip - ret) ** 2)

    def agg(values):
        if cfg.aggregation == "token-mean":
            return sum(values.values()) / max(1, len(values))
        if cfg.aggregation == "constant":
            return sum(values.values()) / (b_ * (cfg.max_len or t_))
        per_seq = [sum(values[(b, t)] for t in ts) / len(ts) for (b, _), ts in seqs.items()]
        return sum(per_seq) / len(per_seq)

    loss = agg(pg) + (cfg.kl_coef * agg(kl) if cfg.kl_coef else 0.0) - (cfg.entropy_coef * agg(ent) if ent else 0.0)
    loss += cfg.value_coef * agg(val) if cfg.value_coef else 0.0
    n = len(ratios)
    metrics = {"clip_frac_low": n_low / n, "clip_frac_high": n_high / n, "behav_masked_frac": n_masked / n,
               "ratio_mean": sum(ratios) / n, "ratio_max": max(ratios), "ratio_min": min(ratios)}
    return loss, metrics


CONFIGS = {
    "ppo": PolicyLossConfig(),
    "clip_higher": PolicyLossConfig(clip_eps_low=0.2, clip_eps_high=0.28),
    "dual_clip": PolicyLossConfig(dual_clip_c=1.5, aggregation="seq-mean-token-mean"),
    "decoupled": PolicyLossConfig(behav_weight="full", aggregation="seq-mean-token-mean"),
    "tis_constant": PolicyLossConfig(behav_weight="truncated", aggregation="constant", max_len=16),
    "icepop_token": PolicyLossConfig(behav_weight="full", behav_mask="token"),
    "icepop_sequence": PolicyLossConfig(behav_mask="sequence", behav_mask_low=0.8, behav_mask_high=1.25),
    "gspo": PolicyLossConfig(ratio_level="sequence", aggregation="seq-mean-token-mean", clip_eps_low=0.03,
                             clip_eps_high=0.04),
    "kl_entropy": PolicyLossConfig(kl_coef=0.05, entropy_coef=0.01, behav_weight="truncated"),
    "ppo_value": PolicyLossConfig(value_coef=0.5, value_clip_eps=0.2, aggregation="seq-mean-token-mean"),
    "asymmetric": PolicyLossConfig(negative_scale=0.25, behav_weight="full", aggregation="constant"),
}


@pytest.mark.parametrize("packed", [False, True], ids=["rows", "packed"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_policy_loss_matches_naive_loop(name, packed):
    cfg = CONFIGS[name]
    logp, old, behav, a, m, seg = random_batch(10 + len(name), packed=packed)
    rng = np.random.default_rng(5)
    ref = logp + jnp.asarray(rng.normal(0, 0.3, logp.shape), jnp.float32)
    logits = jnp.asarray(rng.normal(0, 2.0, logp.shape + (5,)), jnp.float32)
    values = [jnp.asarray(rng.normal(0, 1.0, logp.shape), jnp.float32) for _ in range(3)]  # V, V_old, returns
    loss, met = policy_loss(logp, old, behav, a, m, cfg, segment_ids=seg,
                            extras=RegulariserInputs(ref_logp=ref, logits=logits, value=ValueInputs(*values)))
    want, want_met = naive_policy_loss(logp, old, behav, a, m, cfg, seg, ref, logits, values)
    close(loss, want)
    for k, v in want_met.items():
        close(met[k], v)


def test_reference_batches_exercise_clipping_and_masking():
    # Guard for the test above: the random batches must trip the clips and the IcePop mask, or it proves little.
    logp, old, behav, a, m, _ = random_batch(12)
    _, met = naive_policy_loss(logp, old, behav, a, m, PolicyLossConfig(behav_mask="token"))
    assert met["clip_frac_low"] > 0 and met["clip_frac_high"] > 0 and met["behav_masked_frac"] > 0


def test_policy_loss_jits_and_metrics_are_finite():
    logp, old, behav, a, m, seg = random_batch(4, packed=True)
    cfg = CONFIGS["icepop_token"]
    eager = policy_loss(logp, old, behav, a, m, cfg, segment_ids=seg)
    jitted = jax.jit(policy_loss, static_argnames="cfg")(logp, old, behav, a, m, cfg, segment_ids=seg)
    close(jitted[0], eager[0])
    for k, v in eager[1].items():
        close(jitted[1][k], v)
        assert bool(jnp.isfinite(v)), k


def test_policy_loss_gradient_zero_on_masked_and_clipped_tokens():
    logp, old, _, a, m, _ = random_batch(6)
    cfg = PolicyLossConfig()
    g = jax.grad(lambda x: policy_loss(x, old, None, a, m, cfg)[0])(logp)
    r = jnp.exp(logp - old)
    clipped = ((r > 1.2) & (a > 0)) | ((r < 0.8) & (a < 0))
    assert bool(jnp.any(clipped & (m > 0)))
    assert bool(jnp.all(jnp.where((m == 0) | clipped, g, 0.0) == 0.0))
    assert bool(jnp.all(jnp.where((m > 0) & ~clipped, g, 1.0) != 0.0))


def test_negative_scale_by_hand():
    # One sequence, r = 1 everywhere: L = −mean_t(Â'), Â' = [1, λ·(−2), 0.5]; λ = 0 keeps only the positive
    # tokens.
    logp = jnp.zeros((1, 3))
    a = jnp.array([[1.0, -2.0, 0.5]])
    m = jnp.ones((1, 3))
    for lam, want in ((1.0, 0.5 / 3), (0.25, -1.0 / 3), (0.0, -1.5 / 3)):
        close(policy_loss(logp, logp, None, a, m, PolicyLossConfig(negative_scale=lam))[0], want)
    g = jax.grad(lambda x: policy_loss(x, logp, None, a, m, PolicyLossConfig(negative_scale=0.0))[0])(logp)
    close(g, [[-1.0 / 3, 0.0, -0.5 / 3]])  # failures get no gradient at all


def test_policy_loss_config_and_input_errors():
    with pytest.raises(ValueError, match="negative_scale must be ≥ 0"):
        PolicyLossConfig(negative_scale=-0.5)
    with pytest.raises(ValueError, match="unknown aggregation 'mean'"):
        PolicyLossConfig(aggregation="mean")
    with pytest.raises(ValueError, match="unknown behav_weight"):
        PolicyLossConfig(behav_weight="clip")
    with pytest.raises(ValueError, match="dual_clip_c must be > 1"):
        PolicyLossConfig(dual_clip_c=1.0)
    with pytest.raises(ValueError, match="IcePop band"):
        PolicyLossConfig(behav_mask="token", behav_mask_low=2.0)
    logp, old, behav, a, m, _ = random_batch(7)
    with pytest.raises(ValueError, match=r"advantages has shape \(4,\)"):
        policy_loss(logp, old, behav, a[:, 0], m, PolicyLossConfig())
    with pytest.raises(ValueError, match="kl_coef=0.1 needs ref_logp"):
        policy_loss(logp, old, behav, a, m, PolicyLossConfig(kl_coef=0.1))
    with pytest.raises(ValueError, match="entropy_coef=0.01 needs logits"):
        policy_loss(logp, old, behav, a, m, PolicyLossConfig(entropy_coef=0.01))
    with pytest.raises(ValueError, match="value_coef=1.0 needs values"):
        policy_loss(logp, old, behav, a, m, PolicyLossConfig(value_coef=1.0))


# -------------------------------------------------------------------------------------------------- advantages


def test_dr_grpo_by_hand():
    # group R = [1, 0, 0, 1]: mean 0.5, Dr. GRPO ±0.5; group R = [0.2, 0.4, 0.9]: mean 0.5, [−0.3, −0.1, 0.4]
    close(adv_lib.dr_grpo_advantages(jnp.array([[1.0, 0.0, 0.0, 1.0]])), [[0.5, -0.5, -0.5, 0.5]])
    close(adv_lib.dr_grpo_advantages(jnp.array([[0.2, 0.4, 0.9]])), [[-0.3, -0.1, 0.4]])


def naive_dr_grpo(rewards, ids):
    """Loop reference: for each rollout, the baseline is its own group's mean."""
    out = []
    for r, g in zip(rewards, ids):
        grp = [rewards[j] for j in range(len(rewards)) if ids[j] == g]
        out.append(r - sum(grp) / len(grp))
    return out


def test_dr_grpo_matches_loop_with_uneven_groups():
    rng = np.random.default_rng(8)
    ids = np.array([0, 1, 0, 2, 1, 0, 1, 3], np.int32)  # groups of 3, 3, 1, 1
    r = rng.uniform(-1, 1, len(ids))
    close(adv_lib.dr_grpo_advantages(jnp.asarray(r, jnp.float32), ids, num_groups=4), naive_dr_grpo(list(r), list(ids)))
    # [G, n] layout equals the id layout
    r2 = jnp.asarray(rng.uniform(-1, 1, (3, 4)), jnp.float32)
    fn = adv_lib.dr_grpo_advantages
    close(fn(r2), fn(r2.reshape(-1), np.repeat(np.arange(3), 4)).reshape(3, 4))


def test_group_layout_errors():
    with pytest.raises(ValueError, match=r"must be \[G, n\]"):
        adv_lib.dr_grpo_advantages(jnp.zeros(4))
    with pytest.raises(ValueError, match="must both be"):
        adv_lib.dr_grpo_advantages(jnp.zeros(4), jnp.zeros(3, jnp.int32))
