"""The rollout engine's device programs: a fixed-shape block of new tokens [B, T] through the trunk against the
paged latent cache, then a sample from each row's last fed position (`engine_step`); with MTP drafts, the decode
program drafts, verifies and accepts in one pass (`draft_step`).

`engine_step` serves the prefill program (B = prefill rows, T = chunk) and the plain decode program (B = slots,
T = 1); each compiles once per engine, whatever the request mix, because rows, lengths, positions and page tables are
all traced values. Sampling keys are fold_in(fold_in(key(seed), session), position): a row draws the same token at the
same position whatever else shares the step, whatever the chunking, and across preemption and recompute.

MTP speculative decoding (num_draft = D ≥ 1; the algorithm and its exactness: infer/speculative.py). The D depths
keep their own paged latent pools and the trunk's h_0 has a pool too (`paged_cache.DraftPools`), all under the
session's one page table. Depth k at position j reads h_{k−1, j} and token t_{j+k}, so its cache entry is exact only
once t_{j+D} is committed; entries are (re)written from committed tokens wherever those are known:
  - prefill (`engine_step` with `mtp_*` inputs): after the trunk writes h_0 of the chunk, the depths run over the
    block [c − 2D, c + chunk) (c = first fed position) and write the positions whose D next tokens are all in the
    context — this also rewrites the previous turn's last entries, drafted before the observation was known
  - decode (`draft_step` [slots, 1 + D]): for a row with committed x_0..x_n (x_n not yet fed), the depths rerun the
    window [n − 2D, n): with at most D + 1 tokens committed per step, every entry is rewritten until its inputs are
    all committed (the static engine's window argument, infer/speculative.py). The query at n − 1 drafts
    x̂_{n+1..n+D}; the trunk verifies [x_n, x̂_1..x̂_D] at n..n+D; the acceptance rule returns a accepted drafts and
    the replacement / bonus token. The host commits positions n..n+a and rolls the rest back (their cache entries
    lie beyond the session's length and are overwritten before any query can see them).
Draft keys and acceptance keys are fold_ins of the row's key at n + 1, so rows are independent of their neighbours.
Only the acceptance rate depends on the drafts' cache being exact: verification makes the emitted tokens follow the
target law whatever the drafts are (greedy: token for token the plain decode).
"""

from __future__ import annotations

import collections
import functools
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from composer2_jax.infer import paged_cache, sampler, speculative
from composer2_jax.infer.forward import head, mtp_depth, trunk
from composer2_jax.model.mtp import mtp_head
from composer2_jax.model_config import ModelConfig

TRACES: collections.Counter = collections.Counter()  # (rows, tokens) → times `engine_step` was traced (compiled)


class StepOut(NamedTuple):
    """What one step returns."""

    pools: tuple  # updated paged_cache.Pool per attention layer
    token: jax.Array  # [B] int32 sampled from each row's last fed position (rows that sample keep it)
    logprob: jax.Array  # [B] log-prob under the warped distribution it was drawn from
    policy_logprob: jax.Array  # [B] full softmax at the temperature: the RL behaviour μ
    raw_logprob: jax.Array  # [B] full softmax at temperature 1
    routing: Optional[jax.Array]  # [L_moe, B, T, k] experts of every fed position; None when dense
    draft_pools: Optional[paged_cache.DraftPools] = None  # updated MTP and h_0 pools (drafting engines)


def _keys(seed_B, session_B, position_B):
    """One PRNG key per row: fold_in(fold_in(key(seed), session), position)."""
    one = lambda s, u, p: jax.random.fold_in(jax.random.fold_in(jax.random.key(s), u), p)  # noqa: E731
    return jax.vmap(one)(seed_B, session_B, position_B)


def _mtp_block(params, router_state, mtp_pools, h_BWD, pos_BW, write_BW, table_BA, cfg, absorb, mesh, tokens,
               on_depth=None) -> tuple:
    """Run the MTP depths over a block of positions, writing their latents where `write`: depth m+1 reads
    `tokens(m)` [B, W] (t_{j+m+1} at each block position j) and then `on_depth(m, normed_BWD)` sees its output (the
    drafting decode samples there). Returns the new pools."""
    new = []
    for m, pool in enumerate(mtp_pools):
        cache = paged_cache.PagedLayerCache(pool.ckv, pool.kr, table_BA)
        h_BWD, normed_BWD, cache = mtp_depth(params, router_state, m, cache, h_BWD, tokens(m), pos_BW, write_BW, cfg,
                                             absorb, mesh)
        new.append(paged_cache.Pool(cache.ckv, cache.kr))
        if on_depth is not None:
            on_depth(m, normed_BWD)
    return tuple(new)


@functools.partial(jax.jit, static_argnames=("cfg", "w", "absorb", "mesh"), donate_argnames=("pools", "draft_pools"))
def engine_step(params, router_state, pools, tokens_BT, pos_BT, valid_BT, table_BA, seed_B, session_B, temperature_B,
                top_p_B, draft_pools=None, mtp_tokens_BWK=None, mtp_pos_BW=None, mtp_write_BW=None, *,
                cfg: ModelConfig, w: sampler.Warp, absorb: bool = True, mesh=None) -> StepOut:
    """Feed the valid tokens (a prefix of each row) at their positions, writing their latents into the rows' pages;
    sample at each row's last valid position (rows with no valid token return junk the host ignores). With
    `draft_pools`, also write h_0 of the fed positions and run the MTP depths over the block `mtp_pos_BW` (module
    docstring), their input tokens `mtp_tokens_BWK`, writing where `mtp_write_BW`."""
    TRACES[tokens_BT.shape] += 1
    caches = paged_cache.with_table(pools, table_BA)
    tr = trunk(params, router_state, caches, tokens_BT, pos_BT, valid_BT, cfg, absorb, mesh)
    if draft_pools is not None:
        hidden = paged_cache.scatter_rows(draft_pools.hidden, table_BA, pos_BT, valid_BT, tr.hidden)
        h_BWD = paged_cache.gather_rows(hidden, table_BA, mtp_pos_BW)
        mtp = _mtp_block(params, router_state, draft_pools.mtp, h_BWD, mtp_pos_BW, mtp_write_BW, table_BA, cfg,
                         absorb, mesh, lambda m: mtp_tokens_BWK[..., m])
        draft_pools = paged_cache.DraftPools(mtp, hidden)
    last_B = jnp.maximum(jnp.sum(valid_BT, axis=1) - 1, 0)
    normed_BD = jnp.take_along_axis(tr.normed, last_B[:, None, None], axis=1)[:, 0]
    logits_BV = head(normed_BD, params["lm_head"], cfg)
    temperature_B1, top_p_B1 = temperature_B[:, None], top_p_B[:, None]
    logp_BV = sampler.warp(logits_BV, w, temperature_B1, top_p_B1)
    next_pos_B = jnp.take_along_axis(pos_BT, last_B[:, None], axis=1)[:, 0] + 1  # the position the token will take
    keys_B = _keys(seed_B, session_B, next_pos_B)
    x_B = jax.vmap(sampler.sample)(keys_B, logp_BV)
    policy_B, raw_B = sampler.full_logprobs(logits_BV, x_B, w, temperature_B1)
    pools = tuple(paged_cache.Pool(c.ckv, c.kr) for c in tr.caches)
    return StepOut(pools, x_B, sampler.token_logprob(logp_BV, x_B), policy_B, raw_B, tr.routing, draft_pools)


class DraftOut(NamedTuple):
    """What one drafting decode step returns (K = 1 + D verified positions per row)."""

    pools: tuple  # updated trunk pools
    draft_pools: paged_cache.DraftPools  # updated MTP and h_0 pools
    accepted: jax.Array  # [B] a: drafts accepted (the row emits a + 1 tokens)
    token: jax.Array  # [B, K] emitted tokens: the a accepted drafts, then the replacement or bonus (rest junk)
    logprob: jax.Array  # [B, K] log-prob under the warped target at each emitted token's position
    policy_logprob: jax.Array  # [B, K] full softmax at the temperature: the RL behaviour μ
    raw_logprob: jax.Array  # [B, K] full softmax at temperature 1
    routing: Optional[jax.Array]  # [L_moe, B, K, k] experts of the verified positions n..n+D; None when dense
    drafts: jax.Array  # [B, D] the drafted tokens x̂_{n+1..n+D}


@functools.partial(jax.jit, static_argnames=("cfg", "w", "absorb", "mesh"), donate_argnames=("pools", "draft_pools"))
def draft_step(params, router_state, pools, draft_pools, tail_BX, n_B, live_B, table_BA, mtp_from_B, seed_B,
               session_B, temperature_B, top_p_B, *, cfg: ModelConfig, w: sampler.Warp, absorb: bool = True,
               mesh=None) -> DraftOut:
    """Draft D tokens per row with the MTP depths, verify them with the trunk, accept (module docstring).

    tail_BX [B, 3D]: the committed tokens at positions n − 2D + 1 .. n (x_n last; 0 before position 0), then room
    for the drafts; n_B: committed tokens minus one (the trunk has cached positions < n); MTP entries at positions
    < mtp_from_B (pages shared with other sessions) are read, never written.
    """
    d = len(draft_pools.mtp)
    win = 2 * d
    TRACES[(tail_BX.shape[0], 1 + d)] += 1
    temperature_B1, top_p_B1 = temperature_B[:, None], top_p_B[:, None]
    base_B = _keys(seed_B, session_B, n_B + 1)
    k_draft_B = jax.vmap(lambda k: jax.random.fold_in(k, 1))(base_B)
    k_acc_B = jax.vmap(lambda k: jax.random.fold_in(k, 2))(base_B)
    pos_BW = n_B[:, None] - win + jnp.arange(win)
    write_BW = live_B[:, None] & (pos_BW >= jnp.maximum(mtp_from_B, 0)[:, None])
    h_BWD = paged_cache.gather_rows(draft_pools.hidden, table_BA, pos_BW)
    logqs, tail = [], [tail_BX]

    def on_depth(m, normed_BWD):
        """Depth m+1's query at position n − 1 drafts x̂_{n+m+1}; it joins the later depths' input tokens."""
        logq_BV = sampler.warp(head(normed_BWD[:, -1], mtp_head(params, m), cfg), w, temperature_B1, top_p_B1)
        keys_B = jax.vmap(lambda k: jax.random.fold_in(k, m))(k_draft_B)
        logqs.append(logq_BV)
        tail[0] = tail[0].at[:, win + m].set(jax.vmap(sampler.sample)(keys_B, logq_BV))

    # depth m+1 at window index i (position n − 2D + i) reads t at position n − 2D + i + m + 1: tail index i + m
    mtp = _mtp_block(params, router_state, draft_pools.mtp, h_BWD, pos_BW, write_BW, table_BA, cfg, absorb, mesh,
                     lambda m: tail[0][:, m:m + win], on_depth)
    tail_BX = tail[0]
    drafts_BD = tail_BX[:, win:]
    tokens_BK = tail_BX[:, win - 1:]  # x_n, x̂_{n+1}, ..., x̂_{n+D}
    pos_BK = n_B[:, None] + jnp.arange(d + 1)
    valid_BK = jnp.broadcast_to(live_B[:, None], pos_BK.shape)
    tr = trunk(params, router_state, paged_cache.with_table(pools, table_BA), tokens_BK, pos_BK, valid_BK, cfg,
               absorb, mesh)
    hidden = paged_cache.scatter_rows(draft_pools.hidden, table_BA, pos_BK, valid_BK, tr.hidden)
    logits_BKV = head(tr.normed, params["lm_head"], cfg)
    temperature_B11, top_p_B11 = temperature_B1[:, None], top_p_B1[:, None]
    logp_BKV = sampler.warp(logits_BKV, w, temperature_B11, top_p_B11)
    logq_BDV = jnp.stack(logqs, axis=1)
    one = lambda k, lp, lq, x: tuple(o[0] for o in speculative.accept(k, lp[None], lq[None], x[None]))  # noqa: E731
    n_acc_B, next_B = jax.vmap(one)(k_acc_B, logp_BKV, logq_BDV, drafts_BD)
    emitted_BK = jnp.where(jnp.arange(d + 1) < n_acc_B[:, None], jnp.pad(drafts_BD, ((0, 0), (0, 1))),
                           next_B[:, None])
    policy_BK, raw_BK = sampler.full_logprobs(logits_BKV, emitted_BK, w, temperature_B11)
    pools = tuple(paged_cache.Pool(c.ckv, c.kr) for c in tr.caches)
    return DraftOut(pools, paged_cache.DraftPools(mtp, hidden), n_acc_B, emitted_BK,
                    sampler.token_logprob(logp_BKV, emitted_BK), policy_BK, raw_BK, tr.routing, drafts_BD)
