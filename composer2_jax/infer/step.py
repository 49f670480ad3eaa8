"""The rollout engine's one device program: a fixed-shape block of new tokens [B, T] through the trunk against the
paged latent cache, then a sample from each row's last fed position.

The same function serves the prefill program (B = prefill rows, T = chunk) and the decode program (B = slots, T = 1);
each compiles once per engine, whatever the request mix, because rows, lengths, positions and page tables are all
traced values. Sampling keys are fold_in(fold_in(key(seed), session), position): a row draws the same token at the
same position whatever else shares the step, whatever the chunking, and across preemption and recompute.
"""

from __future__ import annotations

import collections
import functools
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from composer2_jax.config import ModelConfig
from composer2_jax.infer import paged_cache, sampler
from composer2_jax.infer.forward import head, trunk

TRACES: collections.Counter = collections.Counter()  # (rows, tokens) → times `engine_step` was traced (compiled)


class StepOut(NamedTuple):
    """What one step returns."""

    pools: tuple  # updated paged_cache.Pool per attention layer
    token: jax.Array  # [B] int32 sampled from each row's last fed position (rows that sample keep it)
    logprob: jax.Array  # [B] log-prob under the warped distribution it was drawn from
    policy_logprob: jax.Array  # [B] full softmax at the temperature: the RL behaviour μ
    raw_logprob: jax.Array  # [B] full softmax at temperature 1
    routing: Optional[jax.Array]  # [L_moe, B, T, k] experts of every fed position; None when dense


def _keys(seed_B, session_B, position_B):
    """One PRNG key per row: fold_in(fold_in(key(seed), session), position)."""
    one = lambda s, u, p: jax.random.fold_in(jax.random.fold_in(jax.random.key(s), u), p)  # noqa: E731
    return jax.vmap(one)(seed_B, session_B, position_B)


@functools.partial(jax.jit, static_argnames=("cfg", "w", "absorb", "mesh"), donate_argnames=("pools",))
def engine_step(params, router_state, pools, tokens_BT, pos_BT, valid_BT, table_BA, seed_B, session_B, temperature_B,
                top_p_B, *, cfg: ModelConfig, w: sampler.Warp, absorb: bool = True, mesh=None) -> StepOut:
    """Feed the valid tokens (a prefix of each row) at their positions, writing their latents into the rows' pages;
    sample at each row's last valid position (rows with no valid token return junk the host ignores)."""
    TRACES[tokens_BT.shape] += 1
    caches = paged_cache.with_table(pools, table_BA)
    tr = trunk(params, router_state, caches, tokens_BT, pos_BT, valid_BT, cfg, absorb, mesh)
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
    return StepOut(pools, x_B, sampler.token_logprob(logp_BV, x_B), policy_B, raw_B, tr.routing)
