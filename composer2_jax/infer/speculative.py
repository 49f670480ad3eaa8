"""Speculative decoding with the MTP heads as the drafter: draft D tokens, verify them in one target pass, accept by
rejection sampling (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding", Alg. 1;
Chen et al. 2023, "Accelerating LLM Decoding with Speculative Sampling").

One round, for a row whose committed tokens are x_0..x_n (the trunk has processed positions < n; x_n is the last
sampled token, not yet fed) — `static_engine.py` runs it in a device loop (`step.py` in the rollout engine):
  1. draft (`draft`): depth k = 1..D at query position n−1 combines h_{k−1} with t_{n−1+k} (x_n for k = 1, then
     the previous depth's draft) and proposes x̂_{n+k} ~ q_k = warp(head(final_norm_k(h_k))). Each depth's block
     attends to its own latent cache, so the window of the last W = 2D positions is recomputed every round: its
     entries may depend on tokens that were drafts (not yet committed) when they were last written, and with at most
     D + 1 tokens committed per round every entry leaves the window only after its inputs are committed.
  2. verify: the trunk runs [x_n, x̂_{n+1}, ..., x̂_{n+D}] at positions n..n+D in one pass → target p_0..p_D.
  3. accept (`accept`): for i = 1..D, accept x̂_{n+i} with probability min(1, p_{i−1}(x̂)/q_i(x̂)), stopping at the
     first rejection; at a rejection of draft i sample the replacement from norm(max(0, p_{i−1} − q_i)); if all D
     are accepted, sample a bonus token from p_D. Every emitted token is then distributed exactly as p (the lemma
     of both papers), so sampling preserves the target distribution and greedy (one-hot p and q) reproduces plain
     greedy decoding token for token.
  4. commit: the a accepted drafts and the replacement/bonus token (a + 1 tokens); the trunk cache is already
     written for positions n..n+a, and its hidden states there become the next round's h_0 window.
p and q are the *warped* distributions (temperature, top-k, top-p), so the emitted tokens follow the warped target.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from composer2_jax.infer import sampler
from composer2_jax.model.decoding import Decoder, Feed


def accept(key, logp_BKV, logq_BDV, drafts_BD):
    """Rejection sampling (step 3): (accepted drafts a [B], next token [B]); K = D + 1 target distributions."""
    d = drafts_BD.shape[1]
    k_u, k_x = jax.random.split(key)
    if d == 0:  # plain decoding
        return jnp.zeros(logp_BKV.shape[:1], jnp.int32), sampler.sample(k_x, logp_BKV[:, 0])
    p_BKV, q_BDV = jnp.exp(logp_BKV), jnp.exp(logq_BDV)
    px_BD = jnp.take_along_axis(p_BKV[:, :d], drafts_BD[..., None], axis=-1)[..., 0]
    qx_BD = jnp.take_along_axis(q_BDV, drafts_BD[..., None], axis=-1)[..., 0]
    u_BD = jax.random.uniform(k_u, drafts_BD.shape)
    ok_BD = u_BD * qx_BD < px_BD  # u < p/q without dividing; q(x̂) > 0 since x̂ was drawn from q
    n_acc_B = jnp.sum(jnp.cumprod(ok_BD.astype(jnp.int32), axis=1), axis=1)
    resid_BKV = jnp.concatenate([jnp.maximum(p_BKV[:, :d] - q_BDV, 0.0), p_BKV[:, d:]], axis=1)  # [.., D]: bonus = p_D
    pick = lambda x: jnp.take_along_axis(x, n_acc_B[:, None, None], axis=1)[:, 0]  # noqa: E731  [B, V]
    resid_BV = pick(resid_BKV)
    resid_BV = jnp.where(jnp.sum(resid_BV, axis=-1, keepdims=True) > 0, resid_BV, pick(p_BKV))  # p = q: never used
    return n_acc_B, sampler.sample(k_x, jnp.log(resid_BV))


class Sampling(NamedTuple):
    """How a drafter samples: the static warp and its traced temperature and top-p (scalars or broadcastable)."""

    warp: sampler.Warp
    temperature: jax.Array
    top_p: jax.Array

    def logp(self, logits_XV):
        """Log-probabilities of the warped distribution (`sampler.warp`)."""
        return sampler.warp(logits_XV, self.warp, self.temperature, self.top_p)


class DraftWindow(NamedTuple):
    """Where step 1 runs: a block of positions per row and the row's committed tokens."""

    hidden: jax.Array  # [B, W, D] h_0 at the block positions
    positions: jax.Array  # [B, W] the block; query position n − 1 must lie in it
    seq: jax.Array  # [B, S] committed tokens x_0..x_n (the drafts are written at n+1..n+D)
    n: jax.Array  # [B] committed tokens minus one: the trunk has processed positions < n


def draft(variables: dict, caches: tuple, window: DraftWindow, key, sampling: Sampling, dec: Decoder):
    """Step 1 over a block of positions (the prompt after prefill, later the last W) with D = len(caches) depths:
    (drafts [B, D], log q [B, D, V], caches, seq with the drafts written at n+1..n+D).

    Only positions < n are written to the MTP caches (the rest of the block is padding).
    """
    seq_BS, n_B, pos_BW = window.seq, window.n, window.positions
    s = seq_BS.shape[1]
    rows_B = jnp.arange(seq_BS.shape[0])
    write_BW = (pos_BW >= 0) & (pos_BW < n_B[:, None])
    q_idx_B = n_B - 1 - pos_BW[:, 0]
    h_BWD, drafts, logqs, new = window.hidden, [], [], []
    for m, cache in enumerate(caches):
        tok_BW = jnp.take_along_axis(seq_BS, jnp.clip(pos_BW + m + 1, 0, s - 1), axis=1)
        h_BWD, normed_BWD, cache = dec.mtp_depth(variables, m, cache, h_BWD, Feed(tok_BW, pos_BW, write_BW))
        normed_BD = jnp.take_along_axis(normed_BWD, q_idx_B[:, None, None], axis=1)[:, 0]
        logq_BV = sampling.logp(dec.logits(variables, normed_BD, m))
        x_B = sampler.sample(jax.random.fold_in(key, m), logq_BV)
        seq_BS = seq_BS.at[rows_B, n_B + m + 1].set(x_B, mode="drop")
        drafts.append(x_B)
        logqs.append(logq_BV)
        new.append(cache)
    return jnp.stack(drafts, axis=1), jnp.stack(logqs, axis=1), tuple(new), seq_BS
