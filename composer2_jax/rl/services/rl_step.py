"""The trainer's jitted RL computations: token log-probs with router replay, and the policy-gradient update.

Alignment: the device batch is in *target* alignment (`rl/services/trainer.py` `target_batch`): position t holds
the next token `targets[t]` and that token's loss mask, log μ and advantage, so log π(targets[t]) comes from the
hidden state at t with no shift inside the device program — which keeps it correct when the rows are in zigzag
layout over the `context` axis, exactly as CPT batches are. π is the full softmax at the sampling temperature over
the ids below `vocab_limit` (0 = all), the distribution the sampler's `policy_logprobs` (μ) come from
(infer/sampler.py), computed in token chunks (losses/lm.py `chunked_token_logprobs`: no [B, T, V] logits).

The objective is `losses.rl.policy_loss` (decoupled PPO: (π_prox/μ)·min(r·Â, clip(r)·Â), r = π_θ/π_prox, with μ the
sampler's recorded log-probs and π_prox recomputed here before the update; Dr. GRPO's constant normaliser). The
first update of a version runs at the weights π_prox is defined by, so it takes π_prox from its own forward
(`old_logp=None`: stop-gradient of log π_θ) instead of a separate log-prob pass; later updates of the version get
π_prox from passes made before the first.
Router replay: the MoE layers use the experts the sampler used (`routing` [L_moe, B, T, k], aligned with the
forward positions); the aux-loss-free bias update is off in RL (routing is replayed, not chosen).

MTP self-distillation (`PolicyLossConfig.mtp_distill_weight` > 0 on a model with MTP depths): the same forward also
runs the depths on the rollout tokens, trunk and shared embedding/head detached, and adds
w · 1/D Σ_k KL(sg[p_main(·|x≤i+k)] ‖ q_k(·|i)) over the loss-masked (sampled) tokens (losses/mtp.py, temperature 1),
so the heads that draft in the rollout engine keep up with the policy as it moves; metrics `mtp_distill_kl` and
`mtp_alpha` (Σ min(p_main, q_k): the expected acceptance of a draft at temperature 1).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax

from composer2_jax.losses.lm import Chunks, after, chunked_token_logprobs
from composer2_jax.losses.mtp import chunked_mtp_sums, teacher_hidden
from composer2_jax.losses.rl import PolicyLossConfig, RegulariserInputs, policy_loss
from composer2_jax.model import Transformer
from composer2_jax.model.mtp import layout_context, mtp_batch, mtp_head, shift_left
from composer2_jax.train.state import TrainState

RL_BATCH_KEYS = ("tokens", "targets", "positions", "segment_ids", "loss_mask", "behav_logprobs", "advantages")
LOGPROB_CHUNK = 1024  # tokens per chunk of the log-prob computation (peak logits memory = chunk × vocab)


def token_logprobs(model: Transformer, params, router_state, batch: dict, routing, temperature: float,
                   vocab_limit: int = 0, with_entropy: bool = False):
    """([B, T] log π(targets), [B, T] entropy of π or None): π at every position of a target-aligned batch."""
    out = model.apply({"params": params, "router_state": router_state}, batch["tokens"], batch["positions"],
                      batch["segment_ids"], routing, compute_logits=False)
    return chunked_token_logprobs(out.normed, params["lm_head"], batch["targets"], LOGPROB_CHUNK, temperature,
                                  vocab_limit, with_entropy)


def make_logprob_fn(model: Transformer, temperature: float, vocab_limit: int = 0) -> Callable:
    """`(params, router_state, batch, routing) -> logp [B, T]` (π_prox: no gradient)."""

    def f(params, router_state, batch, routing):
        return token_logprobs(model, params, router_state, batch, routing, temperature, vocab_limit)[0]

    return f


def make_update_fn(model: Transformer, tx: optax.GradientTransformation, loss_cfg: PolicyLossConfig,
                   temperature: float, vocab_limit: int = 0) -> Callable:
    """`(state, batch, routing, old_logp, ref_logp) -> (state, metrics)`: one optimizer step on the policy loss;
    `old_logp` [B, T] = log π_prox, or None when the state's weights are π_prox (the version's first update: the
    loss takes it from its own forward, stop-gradient); `ref_logp` [B, T] = log π_ref of the reference policy
    (needed when loss_cfg.kl_coef > 0, else None)."""

    depth = model.cfg.num_mtp_layers if loss_cfg.mtp_distill_weight > 0 else 0
    context = layout_context(model.cfg, model.mesh)

    def loss_fn(params, router_state, batch, routing, old_logp, ref_logp):
        if not depth:
            logp, entropy = token_logprobs(model, params, router_state, batch, routing, temperature, vocab_limit,
                                           with_entropy=True)
            old_logp = jax.lax.stop_gradient(logp) if old_logp is None else old_logp
            return policy_loss(logp, old_logp, batch["behav_logprobs"], batch["advantages"], batch["loss_mask"],
                               loss_cfg, segment_ids=batch["segment_ids"],
                               extras=RegulariserInputs(ref_logp=ref_logp, entropy=entropy))
        mb = mtp_batch({k: batch[k] for k in ("tokens", "targets", "positions", "segment_ids", "loss_mask")}, depth,
                       context)
        out = model.apply({"params": params, "router_state": router_state}, batch["tokens"], batch["positions"],
                          batch["segment_ids"], routing, compute_logits=False, mtp_tokens=mb["mtp_tokens"],
                          mtp_detach=True)
        logp, entropy = chunked_token_logprobs(out.normed, params["lm_head"], batch["targets"], LOGPROB_CHUNK,
                                               temperature, vocab_limit, True)
        old_logp = jax.lax.stop_gradient(logp) if old_logp is None else old_logp
        loss, metrics = policy_loss(logp, old_logp, batch["behav_logprobs"], batch["advantages"], batch["loss_mask"],
                                    loss_cfg, segment_ids=batch["segment_ids"],
                                    extras=RegulariserInputs(ref_logp=ref_logp, entropy=entropy))
        teacher = teacher_hidden(jax.lax.stop_gradient(out.normed), depth,
                                 lambda x, k: shift_left(x, k, context=context))
        heads = [jax.lax.stop_gradient(mtp_head(params, m)) for m in range(depth)]
        student = after(out.mtp.normed, logp)  # its scans after the log-prob scan (losses/lm.py `after`)
        sums = chunked_mtp_sums(student, teacher, heads, jax.lax.stop_gradient(params["lm_head"]),
                                mb["mtp_targets"], mb["mtp_mask"], chunk=Chunks(LOGPROB_CHUNK, model.placement))
        count_M = jnp.maximum(sums.count, 1.0)
        kl = jnp.mean(sums.kl / count_M)
        return loss + loss_cfg.mtp_distill_weight * kl, dict(metrics, mtp_distill_kl=kl,
                                                             mtp_alpha=jnp.mean(sums.accept / count_M))

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def update(state: TrainState, batch: dict, routing, old_logp, ref_logp=None) -> tuple[TrainState, dict[str, Any]]:
        (loss, metrics), grads = grad_fn(state.params, state.router_state, batch, routing, old_logp, ref_logp)
        grad_norm = optax.tree_utils.tree_norm(grads)
        finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        new = state.replace(step=state.step + 1, params=params, opt_state=opt_state)
        new = jax.tree.map(lambda a, b: jnp.where(finite, a, b), new, state.replace(step=state.step + 1))
        return new, dict(metrics, grad_norm=grad_norm, finite=finite,
                         tokens=jnp.sum(batch["loss_mask"].astype(jnp.float32)))

    return update
