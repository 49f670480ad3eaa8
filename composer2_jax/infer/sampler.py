"""Sampling distributions from logits: temperature, top-k, top-p (nucleus), greedy; draws and per-token log-probs.

`warp` turns fp32 logits [..., V] into the log-probabilities of the distribution actually sampled from (−inf
outside its support): ids ≥ `vocab_limit` (a model vocabulary padded beyond the tokenizer's, as vLLM drops the
padded rows of its LM head) are removed first, from every distribution below, so they are never drawn; greedy
(temperature 0) is the one-hot argmax (first index on ties); otherwise logits / T, then top-k (keep logits ≥ the
k-th largest; ties at the threshold are kept), then top-p (keep the most likely tokens until their mass reaches p,
always at least one; ties at the threshold are kept), renormalised.

Which log-prob to record (Completion fields, infer/static_engine.py):
  logprobs         log of the warped distribution above: what the token was truly drawn from.
  policy_logprobs  log_softmax(logits / T) over the FULL vocabulary (below vocab_limit; T = 1 when greedy): the
                   behaviour log-prob μ the RL trainer must use — its π_θ is the same full softmax at the policy's
                   temperature, so the ratio π_θ/μ compares like with like. With top_k = 0 and top_p = 1 (the RL
                   sampling setting) it equals `logprobs`; truncation would make μ a different family than π_θ.
  raw_logprobs     log_softmax(logits), temperature 1: the model's own likelihood (evaluation, KL to a reference).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class Warp(NamedTuple):
    """Static sampling settings (they change the compiled program) — see `SamplingParams`."""

    greedy: bool
    top_k: int  # 0 = off
    top_p: bool  # whether a top-p cut is applied (its value is a traced argument)
    vocab_limit: int = 0  # ids ≥ this are outside every distribution (0 = the whole vocabulary)


def limit_vocab(logits_XV, vocab_limit: int):
    """Logits of ids ≥ vocab_limit set to −inf (0 or ≥ V: unchanged) — the padded rows of a model vocabulary."""
    v = logits_XV.shape[-1]
    if not 0 < vocab_limit < v:
        return logits_XV
    return jnp.where(jnp.arange(v) < vocab_limit, logits_XV, -jnp.inf)


def _top_k(logits_XV, k: int):
    """Logits below the k-th largest set to −inf."""
    kth_X1 = jax.lax.top_k(logits_XV, k)[0][..., -1:]
    return jnp.where(logits_XV >= kth_X1, logits_XV, -jnp.inf)


def _top_p(logits_XV, top_p):
    """Logits outside the smallest most-likely set of mass ≥ top_p set to −inf (the top token always kept)."""
    probs_XV = jax.nn.softmax(logits_XV, axis=-1)
    sorted_XV = -jnp.sort(-probs_XV, axis=-1)
    mass_before_XV = jnp.cumsum(sorted_XV, axis=-1) - sorted_XV
    kept_XV = mass_before_XV < top_p
    kept_XV = kept_XV.at[..., 0].set(True)
    p_min_X1 = jnp.min(jnp.where(kept_XV, sorted_XV, jnp.inf), axis=-1, keepdims=True)
    return jnp.where(probs_XV >= p_min_X1, logits_XV, -jnp.inf)


def warp(logits_XV, w: Warp, temperature, top_p):
    """Log-probabilities [..., V] of the sampling distribution (−inf outside its support), fp32."""
    logits_XV = limit_vocab(logits_XV.astype(jnp.float32), w.vocab_limit)
    if w.greedy:
        hot_XV = jax.nn.one_hot(jnp.argmax(logits_XV, axis=-1), logits_XV.shape[-1], dtype=bool)
        return jnp.where(hot_XV, 0.0, -jnp.inf)
    logits_XV = logits_XV / temperature
    if w.top_k:
        logits_XV = _top_k(logits_XV, min(w.top_k, logits_XV.shape[-1]))
    if w.top_p:
        logits_XV = _top_p(logits_XV, top_p)
    return jax.nn.log_softmax(logits_XV, axis=-1)


def sample(key, logp_XV):
    """One token per row from log-probabilities (greedy rows are one-hot, so this is their argmax)."""
    return jax.random.categorical(key, logp_XV, axis=-1).astype(jnp.int32)


def token_logprob(logp_XV, tokens_X):
    """log p(token) per row."""
    return jnp.take_along_axis(logp_XV, tokens_X[..., None].astype(jnp.int32), axis=-1)[..., 0]


def full_logprobs(logits_XV, tokens_X, w: Warp, temperature):
    """(policy log-prob at the policy temperature, raw log-prob at temperature 1) of the tokens, full vocabulary
    (below w.vocab_limit)."""
    logits_XV = limit_vocab(logits_XV.astype(jnp.float32), w.vocab_limit)
    t = 1.0 if w.greedy else temperature
    return (token_logprob(jax.nn.log_softmax(logits_XV / t, axis=-1), tokens_X),
            token_logprob(jax.nn.log_softmax(logits_XV, axis=-1), tokens_X))
