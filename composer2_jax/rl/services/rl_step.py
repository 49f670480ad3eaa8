"""The trainer's jitted RL computations: token log-probs with router replay, and the policy-gradient update.

Alignment (rl/trajectory.py): log π(tokens[b, t]) comes from the logits at t − 1 of the same segment; a segment's
first token is never trained, so the shift never crosses a segment boundary on a trained token. π is the full
softmax at the sampling temperature over the ids below `vocab_limit` (0 = all), the same distribution the
sampler's `policy_logprobs` (μ) were taken from (infer/sampler.py).

The objective is `losses.rl.policy_loss` (decoupled PPO: (π_prox/μ)·min(r·Â, clip(r)·Â), r = π_θ/π_prox, with μ the
sampler's recorded log-probs and π_prox recomputed here before the update; Dr. GRPO's constant normaliser).
Router replay: the MoE layers use the experts the sampler used (`routing` [L_moe, B, T, k]); the aux-loss-free
bias update is off in RL (routing is replayed, not chosen).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax

from composer2_jax.infer.sampler import limit_vocab
from composer2_jax.losses.rl import PolicyLossConfig, policy_loss
from composer2_jax.model import Transformer
from composer2_jax.train.state import TrainState

RL_BATCH_KEYS = ("tokens", "positions", "segment_ids", "loss_mask", "behav_logprobs", "advantages")


def token_logprobs(model: Transformer, params, router_state, batch: dict, routing, temperature: float,
                   vocab_limit: int = 0):
    """([B, T] log π(tokens) aligned with tokens (0 at t = 0), [B, T, V] logits of the predicting positions;
    ids ≥ vocab_limit have logit −inf when 0 < vocab_limit < V)."""
    out = model.apply({"params": params, "router_state": router_state}, batch["tokens"], batch["positions"],
                      batch["segment_ids"], routing)
    logits_BTV = limit_vocab(out.logits.astype(jnp.float32), vocab_limit) / temperature
    logp_BTV = jax.nn.log_softmax(logits_BTV[:, :-1], axis=-1)
    lp_BT = jnp.take_along_axis(logp_BTV, batch["tokens"][:, 1:, None], axis=-1)[..., 0]
    lp_BT = jnp.concatenate([jnp.zeros_like(lp_BT[:, :1]), lp_BT], axis=1)
    shifted_BTV = jnp.concatenate([logits_BTV[:, :1], logits_BTV[:, :-1]], axis=1)  # logits that predict token t
    return lp_BT, shifted_BTV


def make_logprob_fn(model: Transformer, temperature: float, vocab_limit: int = 0) -> Callable:
    """`(params, router_state, batch, routing) -> logp [B, T]` (π_prox: no gradient)."""

    def f(params, router_state, batch, routing):
        return token_logprobs(model, params, router_state, batch, routing, temperature, vocab_limit)[0]

    return f


def make_update_fn(model: Transformer, tx: optax.GradientTransformation, loss_cfg: PolicyLossConfig,
                   temperature: float, vocab_limit: int = 0) -> Callable:
    """`(state, batch, routing, old_logp, ref_logp) -> (state, metrics)`: one optimizer step on the policy loss;
    `ref_logp` [B, T] = log π_ref of the reference policy (needed when loss_cfg.kl_coef > 0, else None)."""

    def loss_fn(params, router_state, batch, routing, old_logp, ref_logp):
        logp, logits = token_logprobs(model, params, router_state, batch, routing, temperature, vocab_limit)
        return policy_loss(logp, old_logp, batch["behav_logprobs"], batch["advantages"], batch["loss_mask"],
                           loss_cfg, segment_ids=batch["segment_ids"], logits=logits, ref_logp=ref_logp)

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
