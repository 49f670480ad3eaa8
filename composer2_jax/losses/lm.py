"""Language-model cross-entropy computed in token chunks, so [B, T, V] fp32 logits never exist at once."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from composer2_jax.sharding import Placement


class Chunks(NamedTuple):
    """How a chunked loss walks the tokens: about `tokens` per chunk, each chunk constrained on `placement` (the
    model's, given explicitly by the train step; the default constrains nothing)."""

    tokens: int = 1024
    placement: Placement = Placement()


def as_chunks(chunk: "int | Chunks") -> Chunks:
    """A `chunk` argument (tokens, or a full `Chunks`) as `Chunks`."""
    return chunk if isinstance(chunk, Chunks) else Chunks(int(chunk))


class CEResult(NamedTuple):
    """Summed loss and counts; divide outside so gradient accumulation weights every token equally."""

    loss_sum: jax.Array  # Σ_t mask_t · (−log p(y_t))
    z_loss_sum: jax.Array  # Σ_t mask_t · logsumexp_t²
    correct: jax.Array  # Σ_t mask_t · [argmax = y_t]
    count: jax.Array  # Σ_t mask_t


def after(x, dep):
    """`x`, but computed only once `dep` is: an optimization barrier that orders two independent loss loops.

    Used between the main head's chunked loss and the MTP depths' (whose scans would otherwise be independent): XLA's
    CPU runtime may run independent while loops in a different order on each device, and two loops that each hold
    collectives then deadlock (device 1 inside the second loop's all-to-all while the others wait in the first
    loop's all-reduce, observed on 8 fake CPU devices). On accelerators the loops run one after the other anyway.
    """
    return jax.lax.optimization_barrier((x, dep))[0]


def _chunk_ce(h_CD, w_DV, y_C, m_C):
    """CE of one chunk of tokens: fp32 logits [C, V] live only inside this function."""
    logits_CV = jnp.einsum("CD,DV->CV", h_CD, w_DV, preferred_element_type=jnp.float32)
    lse_C = jax.nn.logsumexp(logits_CV, axis=-1)
    gold_C = jnp.take_along_axis(logits_CV, y_C[:, None], axis=-1)[:, 0]
    correct_C = (jnp.argmax(logits_CV, axis=-1) == y_C).astype(jnp.float32)
    return jnp.stack([jnp.sum((lse_C - gold_C) * m_C), jnp.sum(lse_C * lse_C * m_C), jnp.sum(correct_C * m_C)])


CHUNK_BCD = ("activation_batch", "activation_length", "activation_embed")  # a chunk of the residual stream


def chunked_cross_entropy(normed_BTD, w_head_DV, targets_BT, mask_BT, chunk: int | Chunks = 1024) -> CEResult:
    """Σ mask·(logsumexp(h·W) − (h·W)[y]) over tokens, computed about `chunk` tokens (B rows × T/n) at a time
    (`chunk`: a token count, or `Chunks` with the placement the chunks are constrained on).

    Each chunk's logits are recomputed in the backward pass (jax.checkpoint inside lax.scan), so peak memory is
    O(chunk · V) instead of O(B · T · V): at vocab 163840 and 32k tokens that is 21 GB of fp32 logits avoided.
    The z-loss term (PaLM, Chowdhery et al. 2022) is returned for an optional small weight.
    """
    from composer2_jax.model import planning

    chunk = as_chunks(chunk)
    constrain = chunk.placement.constrain
    b, t, d = normed_BTD.shape
    # One chunk in the planner's cost compiles: XLA's cost analysis counts a scan body once.
    n = 1 if planning.count_loops() else num_chunks(t, max(1, chunk.tokens // b))
    # [B, T, D] → [n, B, T/n, D] with token t = i·n + j in chunk j: each chunk keeps the batch (and context) sharding,
    # so every device works on every step of the scan (scanning over a sharded axis would serialise the devices).
    # The chunks are constrained to the residual stream's batch (and context) split: left to propagation, GSPMD
    # splits them like the head's FSDP-sharded D instead and replicates the [n, B, T/n, D] stack to get there
    # (224 GiB buffers per device in kimi_k2_5's pipelined plan, docs/scaling.md).
    split = lambda x: jnp.moveaxis(x.reshape((b, t // n, n) + x.shape[2:]), 2, 0)  # noqa: E731
    xs = (constrain(split(normed_BTD), (None,) + CHUNK_BCD), split(targets_BT.astype(jnp.int32)),
          split(mask_BT.astype(jnp.float32)))
    w_DV = w_head_DV.astype(normed_BTD.dtype)

    def body(carry, x):
        h_BCD, y_BC, m_BC = x
        h_BCD = constrain(h_BCD, CHUNK_BCD)
        sums = _chunk_ce(h_BCD.reshape(-1, d), w_DV, y_BC.reshape(-1), m_BC.reshape(-1))
        return carry + sums, None

    sums, _ = jax.lax.scan(jax.checkpoint(body), jnp.zeros(3, jnp.float32), xs)
    return CEResult(sums[0], sums[1], sums[2], jnp.sum(mask_BT.astype(jnp.float32)))


def num_chunks(t: int, per_row: int) -> int:
    """The smallest divisor n of T with T/n ≤ per_row tokens per row per chunk."""
    for n in range(max(1, -(-t // per_row)), t + 1):
        if t % n == 0:
            return n
    return t


def _chunk_logprobs(h_CD, w_DV, y_C, temperature: float, vocab_limit: int, with_entropy: bool):
    """log π(y) and (optionally) the entropy of π for one chunk; π = softmax(h·W / τ) over ids < vocab_limit."""
    logits_CV = jnp.einsum("CD,DV->CV", h_CD, w_DV, preferred_element_type=jnp.float32) / temperature
    if 0 < vocab_limit < logits_CV.shape[-1]:
        logits_CV = jnp.where(jnp.arange(logits_CV.shape[-1]) < vocab_limit, logits_CV, -jnp.inf)
    logp_CV = jax.nn.log_softmax(logits_CV, axis=-1)
    lp_C = jnp.take_along_axis(logp_CV, y_C[:, None], axis=-1)[:, 0]
    if not with_entropy:
        return lp_C, jnp.zeros_like(lp_C)
    p_CV = jnp.exp(logp_CV)
    return lp_C, -jnp.sum(jnp.where(p_CV > 0, p_CV * logp_CV, 0.0), axis=-1)


def chunked_token_logprobs(normed_BTD, w_head_DV, targets_BT, chunk: int = 1024, temperature: float = 1.0,
                           vocab_limit: int = 0, with_entropy: bool = False):
    """(log π(targets) [B, T], entropy of π [B, T] or None), π = softmax(h·W / τ) restricted to ids < vocab_limit
    (0 = all), computed about `chunk` tokens at a time like `chunked_cross_entropy` (no [B, T, V] logits, chunks
    recomputed in the backward pass, batch and context sharding kept). The RL trainer's π_θ and π_prox."""
    from composer2_jax.model import planning

    b, t, d = normed_BTD.shape
    n = 1 if planning.count_loops() else num_chunks(t, max(1, chunk // b))
    split = lambda x: jnp.moveaxis(x.reshape((b, t // n, n) + x.shape[2:]), 2, 0)  # noqa: E731  [n, B, T/n, ...]
    w_DV = w_head_DV.astype(normed_BTD.dtype)

    def body(_, x):
        h_BCD, y_BC = x
        lp_N, ent_N = _chunk_logprobs(h_BCD.reshape(-1, d), w_DV, y_BC.reshape(-1), temperature, vocab_limit,
                                      with_entropy)
        return None, (lp_N.reshape(y_BC.shape), ent_N.reshape(y_BC.shape))

    _, (lp_nBC, ent_nBC) = jax.lax.scan(jax.checkpoint(body), None,
                                        (split(normed_BTD), split(targets_BT.astype(jnp.int32))))
    merge = lambda x: jnp.moveaxis(x, 0, 2).reshape(b, t)  # noqa: E731  [n, B, T/n] → [B, T] (token i·n + j)
    return merge(lp_nBC), (merge(ent_nBC) if with_entropy else None)
