"""Multi-token-prediction losses: per-depth cross-entropy and self-distillation from the main head, chunked over tokens.

Notation (model/mtp.py): depth k = 1..D predicts t_{i+k+1} at position i from h_k,i; q_k(·|i) = softmax(W·n_k,i)
with n_k = final_norm_k(h_k) and W the shared LM head; p_main(·|x≤j) = softmax(W·n_0,j) is the main head at j.

  CE_k  = 1/N_k Σ_i m_k,i · (−log q_k(t_{i+k+1} | i))                       (DeepSeek-V3 report, eq. 24)
  L_MTP = λ/D · Σ_k CE_k,  λ scheduled (DeepSeek-V3: 0.3 for the first 10T tokens, then 0.1; eq. 25)
  KL_k  = 1/N_k Σ_i m_k,i · KL( sg[p_main(·|x≤i+k)] ‖ q_k(·|i) )          self-distillation: the teacher is the main
          head at the position whose next token is the same target t_{i+k+1} (so only its distribution is matched,
          not a one-hot label); top-N: the teacher is renormalised over its N most likely tokens, KL(p̃ ‖ q) with q
          the full student distribution (Hinton et al. 2015; as used for MTP/EAGLE-style drafters, Li et al. 2024)
  total = λ/D · Σ_k (w_ce · CE_k + w_sd · KL_k)
Per-depth metrics: argmax agreement with the main head, and α_k = Σ_v min(p_main, q_k) = 1 − TV(p_main, q_k), the
expected acceptance of a depth-k draft under speculative sampling at temperature 1 (Leviathan et al. 2023, §3.1).

Everything is returned as sums over tokens (divide outside, as losses/lm.py does). Chunks of `chunk` tokens are
scanned under jax.checkpoint so at most two [chunk, V] fp32 logit blocks (student and teacher) exist at a time.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from composer2_jax.losses.lm import CHUNK_BCD, Chunks, after, as_chunks, num_chunks


@dataclasses.dataclass(frozen=True)
class MTPLossConfig:
    """How the MTP loss is weighted and what it distils; active only when model.num_mtp_layers > 0."""

    # λ in L_MTP = λ/D Σ_k (ce_weight·CE_k + distill_weight·KL_k) before switch_step (DeepSeek: 0.3)
    weight: float = 0.3
    final_weight: float = 0.1  # λ after the switch (DeepSeek-V3: 0.1 for the last 4.8T of 14.8T tokens)
    switch_step: int = -1  # step where λ starts moving to final_weight; -1 = keep `weight` throughout
    ramp_steps: int = 0  # steps of the linear move from weight to final_weight (0 = a step change)
    ce_weight: float = 1.0  # weight of each depth's cross-entropy on t_{i+k+1}
    distill_weight: float = 0.0  # weight of the self-distillation KL(sg[p_main(·|x≤i+k)] ‖ q_k(·|i))
    distill_warmup_steps: int = 0  # the distillation weight rises linearly from 0 to distill_weight over these steps
    distill_top_n: int = 0  # 0 = full-vocabulary KL; N = teacher renormalised over its top-N tokens
    detach_trunk: bool = False  # stop the MTP loss's gradient into the trunk and the shared embedding/head

    def __post_init__(self):
        if self.weight < 0 or self.final_weight < 0:
            raise ValueError(f"mtp.weight={self.weight} and mtp.final_weight={self.final_weight} must be >= 0")
        if self.ce_weight < 0 or self.distill_weight < 0:
            raise ValueError(f"mtp.ce_weight={self.ce_weight} and mtp.distill_weight={self.distill_weight} "
                             f"must be >= 0")
        if min(self.distill_top_n, self.ramp_steps, self.distill_warmup_steps) < 0:
            raise ValueError(f"mtp.distill_top_n={self.distill_top_n}, mtp.ramp_steps={self.ramp_steps} and "
                             f"mtp.distill_warmup_steps={self.distill_warmup_steps} must be >= 0")

    @property
    def enabled(self) -> bool:
        """Whether the loss can ever be non-zero."""
        return (self.weight > 0 or self.final_weight > 0) and (self.ce_weight > 0 or self.distill_weight > 0)


def mtp_weight(step, c: MTPLossConfig):
    """λ(step): `weight` until `switch_step`, then linearly to `final_weight` over `ramp_steps` (−1: never switch)."""
    if c.switch_step < 0:
        return jnp.asarray(c.weight, jnp.float32)
    s = jnp.asarray(step, jnp.float32) - c.switch_step
    frac = jnp.clip(s / c.ramp_steps, 0.0, 1.0) if c.ramp_steps else (s >= 0).astype(jnp.float32)
    return jnp.asarray(c.weight + (c.final_weight - c.weight) * frac, jnp.float32)


def distill_weight(step, c: MTPLossConfig):
    """w_sd(step): 0 → `distill_weight` linearly over `distill_warmup_steps` (a step change when 0)."""
    if not c.distill_warmup_steps:
        return jnp.asarray(c.distill_weight, jnp.float32)
    frac = jnp.clip(jnp.asarray(step, jnp.float32) / c.distill_warmup_steps, 0.0, 1.0)
    return jnp.asarray(c.distill_weight, jnp.float32) * frac


class MTPSums(NamedTuple):
    """Per-depth sums over tokens (each [M]); divide by `count` (or a global count) outside."""

    ce: jax.Array  # Σ m · −log q_k(y)
    kl: jax.Array  # Σ m · KL(p_main ‖ q_k)   (teacher renormalised over its top-N when top_n > 0)
    agree: jax.Array  # Σ m · [argmax q_k = argmax p_main]
    accept: jax.Array  # Σ m · Σ_v min(p_main, q_k)
    count: jax.Array  # Σ m


def _chunk_terms(h_CD, t_CD, w_student_DV, w_teacher_DV, y_C, m_C, top_n: int):
    """[ce, kl, agree, accept] sums of one chunk: student and teacher [C, V] logits live only in here."""
    s_CV = jnp.einsum("CD,DV->CV", h_CD, w_student_DV, preferred_element_type=jnp.float32)
    logq_CV = jax.nn.log_softmax(s_CV, axis=-1)
    ce_C = -jnp.take_along_axis(logq_CV, y_C[:, None], axis=-1)[:, 0]
    t_CV = jax.lax.stop_gradient(jnp.einsum("CD,DV->CV", t_CD, w_teacher_DV, preferred_element_type=jnp.float32))
    logp_CV = jax.nn.log_softmax(t_CV, axis=-1)
    if top_n:
        top_CN, idx_CN = jax.lax.top_k(t_CV, top_n)
        logp_CN = jax.nn.log_softmax(top_CN, axis=-1)  # the teacher renormalised over its top-N
        kl_C = jnp.sum(jnp.exp(logp_CN) * (logp_CN - jnp.take_along_axis(logq_CV, idx_CN, axis=-1)), axis=-1)
    else:
        kl_C = jnp.sum(jnp.exp(logp_CV) * (logp_CV - logq_CV), axis=-1)
    agree_C = (jnp.argmax(s_CV, axis=-1) == jnp.argmax(t_CV, axis=-1)).astype(jnp.float32)
    accept_C = jax.lax.stop_gradient(jnp.sum(jnp.minimum(jnp.exp(logp_CV), jnp.exp(logq_CV)), axis=-1))
    return jnp.stack([jnp.sum(x * m_C) for x in (ce_C, kl_C, agree_C, accept_C)])


def _depth_sums(h_BTD, t_BTD, w_student_DV, w_teacher_DV, y_BT, m_BT, top_n: int, chunk: Chunks):
    """[ce, kl, agree, accept] sums of one depth, about `chunk` tokens at a time (recomputed in the backward pass).

    Chunked like `chunked_cross_entropy`: [B, T, ...] → [n, B, T/n, ...], so every chunk keeps the batch (and
    context) split and the scan runs over an unsharded axis. (Flattening B·T and scanning over [B·T/chunk] made
    the scanned axis the batch-sharded one: GSPMD all-gathered the whole [B·T, D] stack onto every device, 224 GiB
    buffers per device in kimi_k2_5's pipelined plan, docs/scaling.md.)
    """
    from composer2_jax.model import planning

    constrain = chunk.placement.constrain
    b, t, d = h_BTD.shape
    n = 1 if planning.count_loops() else num_chunks(t, max(1, chunk.tokens // b))
    split = lambda x: jnp.moveaxis(x.reshape((b, t // n, n) + x.shape[2:]), 2, 0)  # noqa: E731
    xs = (constrain(split(h_BTD), (None,) + CHUNK_BCD), constrain(split(t_BTD), (None,) + CHUNK_BCD),
          split(y_BT.astype(jnp.int32)), split(m_BT.astype(jnp.float32)))

    def body(carry, x):
        h_BCD, t_BCD, y_BC, m_BC = x
        h_CD, t_CD = (constrain(a, CHUNK_BCD).reshape(-1, d) for a in (h_BCD, t_BCD))
        return carry + _chunk_terms(h_CD, t_CD, w_student_DV, w_teacher_DV, y_BC.reshape(-1), m_BC.reshape(-1),
                                    top_n), None

    sums, _ = jax.lax.scan(jax.checkpoint(body), jnp.zeros(4, jnp.float32), xs)
    return sums


def chunked_mtp_sums(normed_MBTD, teacher_MBTD, heads_MDV, w_teacher_DV, targets_BTM, mask_BTM, *, top_n: int = 0,
                     chunk: int | Chunks = 1024) -> MTPSums:
    """Per-depth CE / self-distillation KL / agreement / acceptance sums, chunked over tokens.

    Args:
      normed_MBTD: the MTP depths' final-normed hidden states (`ModelOutput.mtp.normed`).
      teacher_MBTD: per depth k, the main model's final-normed hidden state at position i+k, aligned to i
        (`teacher_hidden`); its logits are stop-gradient.
      heads_MDV: the LM head each depth's student uses (the shared head, stop_gradient'ed to detach it), a sequence
        of M [D, V] arrays.
      w_teacher_DV: the main LM head.
      targets_BTM, mask_BTM: t_{i+k+1} and its validity per depth (`model.mtp.mtp_batch`).
      top_n: 0 = full-vocabulary KL; N > 0 = the teacher renormalised over its top-N tokens.
      chunk: tokens per chunk, or `Chunks` with the placement the chunks are constrained on.
    Returns:
      MTPSums with [M] entries.
    """
    rows = []
    for m in range(normed_MBTD.shape[0]):
        dt = normed_MBTD.dtype
        h_BTD = normed_MBTD[m] if not rows else after(normed_MBTD[m], rows[-1])  # one depth's scan after another
        rows.append(_depth_sums(h_BTD, teacher_MBTD[m].astype(dt), heads_MDV[m].astype(dt),
                                w_teacher_DV.astype(dt), targets_BTM[..., m], mask_BTM[..., m], top_n,
                                as_chunks(chunk)))
    s_M4 = jnp.stack(rows)
    return MTPSums(s_M4[:, 0], s_M4[:, 1], s_M4[:, 2], s_M4[:, 3], jnp.sum(mask_BTM.astype(jnp.float32), axis=(0, 1)))


def teacher_hidden(normed_BTD, depth: int, shift: Callable) -> jax.Array:
    """[M, B, T, D]: the main head's input at position i+k, aligned to position i, for k = 1..M (`shift(x, k)`)."""
    return jnp.stack([shift(normed_BTD, k) for k in range(1, depth + 1)])


def mtp_objective(sums: MTPSums, count_M, lam, c: MTPLossConfig, w_sd=None):
    """λ/D · Σ_k (w_ce·CE_k + w_sd·KL_k), each term normalised by its depth's token count `count_M` (global batch);
    w_sd defaults to `c.distill_weight` (the train step passes `distill_weight(step, c)`)."""
    w_sd = c.distill_weight if w_sd is None else w_sd
    per_depth_M = (c.ce_weight * sums.ce + w_sd * sums.kl) / jnp.maximum(count_M, 1.0)
    return lam / sums.ce.shape[0] * jnp.sum(per_depth_M)


def mtp_metrics(sums: MTPSums, lam) -> dict:
    """Scalars per depth: mtp/ce_k, mtp/kl_k, mtp/agree_k, mtp/accept_k (means over valid tokens), and mtp/weight."""
    n_M = jnp.maximum(sums.count, 1.0)
    out = {"mtp/weight": lam}
    for k in range(sums.ce.shape[0]):
        for name in ("ce", "kl", "agree", "accept"):
            out[f"mtp/{name}_{k + 1}"] = getattr(sums, name)[k] / n_M[k]
    return out
