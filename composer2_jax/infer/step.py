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
from composer2_jax.model.decoding import Decoder, Feed

TRACES: collections.Counter = collections.Counter()  # (rows, tokens) → times `engine_step` was traced (compiled)


class StepProgram(NamedTuple):
    """The static part of a step program (changes the compiled program): the decoder and the sampling warp."""

    decoder: Decoder
    warp: sampler.Warp


class Rows(NamedTuple):
    """Per-row sampling inputs of a step, each [B]."""

    seed: jax.Array  # uint32 the reply's sampling seed
    session: jax.Array  # int32 the session id
    temperature: jax.Array  # float32 (> 0; greedy is in the warp)
    top_p: jax.Array  # float32


class MtpBlock(NamedTuple):
    """The prefill program's MTP block (module docstring): the depths' input tokens and where they write."""

    tokens: jax.Array  # [B, W, D] t_{j+m+1} for depth m+1 at each block position j
    positions: jax.Array  # [B, W]
    write: jax.Array  # [B, W] bool


class DraftRows(NamedTuple):
    """Per-row inputs of the drafting decode program (`draft_step`)."""

    tail: jax.Array  # [B, 3D] committed tokens at n − 2D + 1 .. n (0 before position 0), then room for the drafts
    n: jax.Array  # [B] committed tokens minus one (the trunk has cached positions < n)
    live: jax.Array  # [B] bool rows that decode
    mtp_from: jax.Array  # [B] MTP entries at positions below it (pages shared with other sessions) are never written


class StepOut(NamedTuple):
    """What one step returns."""

    pools: tuple  # updated paged_cache.Pool per attention layer
    token: jax.Array  # [B] int32 sampled from each row's last fed position (rows that sample keep it)
    logprob: jax.Array  # [B] log-prob under the warped distribution it was drawn from
    policy_logprob: jax.Array  # [B] full softmax at the temperature: the RL behaviour μ
    raw_logprob: jax.Array  # [B] full softmax at temperature 1
    routing: Optional[jax.Array]  # [L_moe, B, T, k] experts of every fed position; None when dense
    draft_pools: Optional[paged_cache.DraftPools] = None  # updated MTP and h_0 pools (drafting engines)


def _keys(rows: Rows, position_B):
    """One PRNG key per row: fold_in(fold_in(key(seed), session), position)."""
    one = lambda s, u, p: jax.random.fold_in(jax.random.fold_in(jax.random.key(s), u), p)  # noqa: E731
    return jax.vmap(one)(rows.seed, rows.session, position_B)


def _pools(caches) -> tuple:
    """The pools of per-layer paged caches (what the engine keeps between steps)."""
    return tuple(paged_cache.Pool(c.ckv, c.kr) for c in caches)


def _mtp_block(variables, mtp_pools, h_BWD, block: Feed, table_BA, dec: Decoder, on_depth=None) -> tuple:
    """Run the MTP depths over a block of positions, writing their latents where `block.write`: depth m+1 reads
    `block.tokens(m)` [B, W] (t_{j+m+1} at each block position j) and then `on_depth(m, normed_BWD)` sees its output
    (the drafting decode samples there). Returns the new pools."""
    new = []
    for m, pool in enumerate(mtp_pools):
        cache = paged_cache.PagedLayerCache(pool.ckv, pool.kr, table_BA)
        h_BWD, normed_BWD, cache = dec.mtp_depth(variables, m, cache, h_BWD, block._replace(tokens=block.tokens(m)))
        new.append(paged_cache.Pool(cache.ckv, cache.kr))
        if on_depth is not None:
            on_depth(m, normed_BWD)
    return tuple(new)


@functools.partial(jax.jit, static_argnames=("prog",), donate_argnames=("pools", "draft_pools"))
def engine_step(variables, pools, feed: Feed, table_BA, rows: Rows, draft_pools=None,
                mtp: Optional[MtpBlock] = None, *, prog: StepProgram) -> StepOut:
    """Feed the valid tokens (a prefix of each row) at their positions, writing their latents into the rows' pages;
    sample at each row's last valid position (rows with no valid token return junk the host ignores). With
    `draft_pools`, also write h_0 of the fed positions and run the MTP depths over the block `mtp` (module
    docstring)."""
    TRACES[feed.tokens.shape] += 1
    dec, w = prog
    tr = dec.trunk(variables, paged_cache.with_table(pools, table_BA), feed)
    if draft_pools is not None:
        hidden = paged_cache.scatter_rows(draft_pools.hidden, table_BA, feed.positions, feed.write, tr.hidden)
        h_BWD = paged_cache.gather_rows(hidden, table_BA, mtp.positions)
        block = Feed(lambda m: mtp.tokens[..., m], mtp.positions, mtp.write)
        draft_pools = paged_cache.DraftPools(_mtp_block(variables, draft_pools.mtp, h_BWD, block, table_BA, dec),
                                             hidden)
    last_B = jnp.maximum(jnp.sum(feed.write, axis=1) - 1, 0)
    logits_BV = dec.logits(variables, jnp.take_along_axis(tr.normed, last_B[:, None, None], axis=1)[:, 0])
    temperature_B1, top_p_B1 = rows.temperature[:, None], rows.top_p[:, None]
    logp_BV = sampler.warp(logits_BV, w, temperature_B1, top_p_B1)
    next_pos_B = jnp.take_along_axis(feed.positions, last_B[:, None], axis=1)[:, 0] + 1  # the token's position
    x_B = jax.vmap(sampler.sample)(_keys(rows, next_pos_B), logp_BV)
    policy_B, raw_B = sampler.full_logprobs(logits_BV, x_B, w, temperature_B1)
    return StepOut(_pools(tr.caches), x_B, sampler.token_logprob(logp_BV, x_B), policy_B, raw_B, tr.routing,
                   draft_pools)


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


def _draft(variables, draft_pools, rows_in: DraftRows, table_BA, rows: Rows, prog: StepProgram):
    """Draft D tokens per row from the MTP depths over the window [n − 2D, n), rewriting its entries: (tail with
    the drafts written after the committed tokens, log q [B, D, V], new MTP pools)."""
    dec, w = prog
    d = len(draft_pools.mtp)
    win = 2 * d
    temperature_B1, top_p_B1 = rows.temperature[:, None], rows.top_p[:, None]
    k_draft_B = jax.vmap(lambda k: jax.random.fold_in(k, 1))(_keys(rows, rows_in.n + 1))
    pos_BW = rows_in.n[:, None] - win + jnp.arange(win)
    write_BW = rows_in.live[:, None] & (pos_BW >= jnp.maximum(rows_in.mtp_from, 0)[:, None])
    h_BWD = paged_cache.gather_rows(draft_pools.hidden, table_BA, pos_BW)
    logqs, tail = [], [rows_in.tail]

    def on_depth(m, normed_BWD):
        """Depth m+1's query at position n − 1 drafts x̂_{n+m+1}; it joins the later depths' input tokens."""
        logq_BV = sampler.warp(dec.logits(variables, normed_BWD[:, -1], m), w, temperature_B1, top_p_B1)
        keys_B = jax.vmap(lambda k: jax.random.fold_in(k, m))(k_draft_B)
        logqs.append(logq_BV)
        tail[0] = tail[0].at[:, win + m].set(jax.vmap(sampler.sample)(keys_B, logq_BV))

    # depth m+1 at window index i (position n − 2D + i) reads t at position n − 2D + i + m + 1: tail index i + m
    block = Feed(lambda m: tail[0][:, m:m + win], pos_BW, write_BW)
    mtp = _mtp_block(variables, draft_pools.mtp, h_BWD, block, table_BA, dec, on_depth)
    return tail[0], jnp.stack(logqs, axis=1), mtp


@functools.partial(jax.jit, static_argnames=("prog",), donate_argnames=("pools", "draft_pools"))
def draft_step(variables, pools, draft_pools, rows_in: DraftRows, table_BA, rows: Rows, *,
               prog: StepProgram) -> DraftOut:
    """Draft D tokens per row with the MTP depths, verify them with the trunk, accept (module docstring)."""
    dec, w = prog
    d = len(draft_pools.mtp)
    win = 2 * d
    TRACES[(rows_in.tail.shape[0], 1 + d)] += 1
    k_acc_B = jax.vmap(lambda k: jax.random.fold_in(k, 2))(_keys(rows, rows_in.n + 1))
    tail_BX, logq_BDV, mtp = _draft(variables, draft_pools, rows_in, table_BA, rows, prog)
    drafts_BD = tail_BX[:, win:]
    pos_BK = rows_in.n[:, None] + jnp.arange(d + 1)
    feed = Feed(tail_BX[:, win - 1:], pos_BK, jnp.broadcast_to(rows_in.live[:, None], pos_BK.shape))  # x_n, x̂..
    tr = dec.trunk(variables, paged_cache.with_table(pools, table_BA), feed)
    hidden = paged_cache.scatter_rows(draft_pools.hidden, table_BA, pos_BK, feed.write, tr.hidden)
    logits_BKV = dec.logits(variables, tr.normed)
    temperature_B11, top_p_B11 = rows.temperature[:, None, None], rows.top_p[:, None, None]
    logp_BKV = sampler.warp(logits_BKV, w, temperature_B11, top_p_B11)
    one = lambda k, lp, lq, x: tuple(o[0] for o in speculative.accept(k, lp[None], lq[None], x[None]))  # noqa: E731
    n_acc_B, next_B = jax.vmap(one)(k_acc_B, logp_BKV, logq_BDV, drafts_BD)
    emitted_BK = jnp.where(jnp.arange(d + 1) < n_acc_B[:, None], jnp.pad(drafts_BD, ((0, 0), (0, 1))),
                           next_B[:, None])
    policy_BK, raw_BK = sampler.full_logprobs(logits_BKV, emitted_BK, w, temperature_B11)
    return DraftOut(_pools(tr.caches), paged_cache.DraftPools(mtp, hidden), n_acc_B, emitted_BK,
                    sampler.token_logprob(logp_BKV, emitted_BK), policy_BK, raw_BK, tr.routing, drafts_BD)
