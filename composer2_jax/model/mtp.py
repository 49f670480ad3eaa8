"""Multi-token prediction (DeepSeek-V3 report §2.2): D sequential modules after the trunk, sharing its embedding and
LM head, plus the token shifts that feed them.

For depth k = 1..D and position i (h_0 = the trunk's last hidden state before the final norm, `ModelOutput.hidden`):
  1. e_i  = enorm(Emb(t_{i+k}))                     the token k ahead, from the SHARED embedding
  2. g_i  = hnorm(h_{k-1,i})
  3. h'_i = [e_i; g_i] · W_eh                        eh_proj [2D, D]
  4. h_k  = TRM_k(h')                                one decoder block (MoE or dense by cfg.is_moe_layer(L + k − 1))
  5. P_k  = softmax(final_norm_k(h_k) · W_head)      the SHARED LM head, applied by the loss or the sampler
The depth-k prediction at position i is of t_{i+k+1} and depends on tokens ≤ i+k only.

The report writes the concatenation as [RMSNorm(h); RMSNorm(Emb)]; the released DeepSeek-V3 weights (and so
`composer2_jax/convert`, README "MTP naming") feed eh_proj with [enorm(emb); hnorm(h)] — that order is used here, so
imported weights work unchanged. Parameter names follow convert/README.md: params["mtp"]["mtp_{k-1}"] =
{enorm, hnorm, eh_proj, block, final_norm} (+ `embedding` / `head` only when a checkpoint carries copies that differ
from the main model's; `MTPLayer` and `mtp_head` then use them) and router_state["mtp"]["mtp_{k-1}"]["block"].

Shifts happen in the ORIGINAL token order. `shift_tokens(tokens, k, segment_ids, positions)` gives t_{i+k} at
position i and a mask that is False where i+k runs past the row, into another packed document (segment id), into
padding (segment 0) or across a position discontinuity. With the zigzag context-parallel layout
(model/context_parallel.py), shift before zigzag — `zigzag_batch({**batch, **mtp_batch(batch, D)}, n)` (the MTP
arrays are [B, T, M] so the sequence stays on axis 1) — or, on an already-zigzagged batch, pass `context=n` to
`mtp_batch` / `shift_left`, which unzigzag → shift → zigzag. Never shift a zigzagged array directly.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
from flax import linen as nn

from composer2_jax.model.attention import CacheStep
from composer2_jax.model.block import DecoderLayer, remat
from composer2_jax.model.layers import RMSNorm, dtype_of, embed_tokens, param
from composer2_jax.model_config import ModelConfig
from composer2_jax.sharding import Placement

MTP_KEYS = ("mtp_tokens", "mtp_targets", "mtp_mask")  # batch keys, each [B, T, M], natural or zigzag like the batch


# ------------------------------------------------------------------------------------------------- token shifts


def shift_left(x, k: int, axis: int = 1, context: int = 1):
    """x[i + k] at index i along `axis` (zeros past the end); `context` > 1: x is in zigzag layout over n shards."""
    if context > 1:
        from composer2_jax.model.context_parallel import unzigzag, zigzag

        return zigzag(shift_left(unzigzag(x, context, axis), k, axis), context, axis)
    t = x.shape[axis]
    k = min(k, t)
    body = jax.lax.slice_in_dim(x, k, t, axis=axis)
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, k)
    return jnp.pad(body, pad)


def shift_tokens(tokens_BT, k: int, segment_ids_BT=None, positions_BT=None):
    """(t_{i+k} at position i [B, T], valid [B, T]) in natural order; invalid entries hold token 0.

    Valid iff i + k < T and, when given, the token k ahead lies in the same non-padding segment and its position is
    exactly positions[i] + k (so a document split across rows, or any discontinuity, is never bridged).
    """
    t = tokens_BT.shape[1]
    valid_BT = jnp.broadcast_to(jnp.arange(t) + k < t, tokens_BT.shape)
    if segment_ids_BT is not None:
        valid_BT &= (shift_left(segment_ids_BT, k) == segment_ids_BT) & (segment_ids_BT != 0)
    if positions_BT is not None:
        valid_BT &= shift_left(positions_BT, k) == positions_BT + k
    return jnp.where(valid_BT, shift_left(tokens_BT, k), 0), valid_BT


CONTEXT_PARALLEL_KERNELS = ("ring", "ring_latent", "allgather_cp", "allgather_cp_latent")  # inputs in zigzag layout


def layout_context(cfg: ModelConfig, mesh: Optional[jax.sharding.Mesh]) -> int:
    """n when the model's inputs are in zigzag layout over `mesh`'s `context` axis of size n (CP kernels), else 1."""
    if cfg.attention_kernel not in CONTEXT_PARALLEL_KERNELS:
        return 1
    if mesh is None or "context" not in mesh.axis_names:
        return 1
    return int(dict(mesh.shape)["context"])


def mtp_batch(batch: dict, depth: int, context: int = 1) -> dict:
    """MTP inputs and targets for depths 1..M: {mtp_tokens, mtp_targets, mtp_mask}, each [B, T, M].

    mtp_tokens[b, i, k−1] = t_{i+k} (the depth-k input), mtp_targets[.., k−1] = targets[i+k] = t_{i+k+1} and
    mtp_mask = shift validity ∧ loss_mask[i+k]. `context` > 1 reads a zigzagged batch and returns zigzagged arrays.
    """
    if context > 1:
        from composer2_jax.model.context_parallel import unzigzag, zigzag

        natural = {k: unzigzag(v, context) for k, v in batch.items() if k not in MTP_KEYS}
        return {k: zigzag(v, context) for k, v in mtp_batch(natural, depth).items()}
    seg, pos = batch.get("segment_ids"), batch.get("positions")
    toks, tgts, masks = [], [], []
    for k in range(1, depth + 1):
        tok_BT, valid_BT = shift_tokens(batch["tokens"], k, seg, pos)
        toks.append(tok_BT)
        tgts.append(jnp.where(valid_BT, shift_left(batch["targets"], k), 0))
        masks.append(valid_BT & (shift_left(batch["loss_mask"], k) > 0))
    stack = lambda xs, dt: jnp.stack(xs, axis=-1).astype(dt)  # noqa: E731  [B, T, M]
    return {"mtp_tokens": stack(toks, jnp.int32), "mtp_targets": stack(tgts, jnp.int32),
            "mtp_mask": stack(masks, jnp.int32)}


# ------------------------------------------------------------------------------------------------- modules


class MTPOutput(NamedTuple):
    """What the MTP modules return (MoE fields cover the MoE depths only, in depth order; None when all dense)."""

    normed: jax.Array  # [M, B, T, D] final_norm_k(h_k): the input of the shared LM head
    hidden: jax.Array  # [M, B, T, D] h_k before the norm
    routing: Optional[jax.Array]  # [M_moe, B, T, k] expert ids of the MTP blocks
    moe_load: Optional[jax.Array]  # [M_moe, E] tokens per expert (for the router-bias update)
    balance_loss: jax.Array  # scalar: mean sequence-wise balance loss over the MoE depths (0 when dense)


def mtp_is_moe(cfg: ModelConfig, m: int) -> bool:
    """Depth m+1's block is MoE by DeepSeek's layer rule at absolute index num_layers + m."""
    return cfg.is_moe_layer(cfg.num_layers + m)


class MTPLayer(nn.Module):
    """One MTP depth: (h_{k-1}, t_{i+k}) → (h_k, final_norm(h_k), MoE aux or None)."""

    cfg: ModelConfig
    moe: bool
    placement: Optional[Placement | jax.sharding.Mesh] = None  # where its block runs (model/block.py DecoderLayer)

    @nn.compact
    def __call__(self, h_BTD, next_tokens_BT, embed_VD, positions_BT, segment_ids_BT=None, detach: bool = False,
                 cached: Optional[CacheStep] = None):
        """With `cached` (decoding), the block runs against its latent cache (model/block.py) and the result is
        ((h_k, final_norm(h_k), aux), updated cache)."""
        c = self.cfg
        dt = dtype_of(c.dtype)
        norm = lambda name: RMSNorm(c.rms_norm_eps, c.dtype, c.param_dtype, name=name)  # noqa: E731
        if self.has_variable("params", "embedding"):  # a checkpoint's own copy (see module docstring)
            embed_VD = self.get_variable("params", "embedding")
        if detach:
            embed_VD = jax.lax.stop_gradient(embed_VD)
        e_BTD = embed_tokens(embed_VD, next_tokens_BT, dt, Placement.of(self.placement))
        w_eh = param(self, "eh_proj", (2 * c.hidden_size, c.hidden_size), (None, "embed"),
                     nn.initializers.normal(c.initializer_range), dtype_of(c.param_dtype)).astype(dt)
        x_BTX = jnp.concatenate([norm("enorm")(e_BTD), norm("hnorm")(h_BTD.astype(dt))], axis=-1)  # [B, T, 2D]
        if cached is not None:  # no backward pass to checkpoint for
            (h_BTD, aux), cache = DecoderLayer(c, self.moe, self.placement, name="block")(
                x_BTX @ w_eh, positions_BT, cached=cached)
            return (h_BTD, norm("final_norm")(h_BTD), aux), cache
        block = remat(DecoderLayer, c.remat_policy)(c, self.moe, self.placement, name="block")
        h_BTD, aux = block(x_BTX @ w_eh, positions_BT, segment_ids_BT)
        return h_BTD, norm("final_norm")(h_BTD), aux


class MTP(nn.Module):
    """All D depths, chained: depth k reads depth k−1's hidden state (h_0 = the trunk's)."""

    cfg: ModelConfig
    placement: Optional[Placement | jax.sharding.Mesh] = None  # where the depths' blocks run (model/block.py)

    @nn.compact
    def __call__(self, h0_BTD, tokens_BTM, embed_VD, positions_BT, segment_ids_BT=None, detach: bool = False):
        c = self.cfg
        if tokens_BTM.shape[-1] != c.num_mtp_layers:
            raise ValueError(f"mtp_tokens has {tokens_BTM.shape[-1]} depths; model.num_mtp_layers={c.num_mtp_layers}")
        h_BTD = jax.lax.stop_gradient(h0_BTD) if detach else h0_BTD
        normed, hidden, auxes = [], [], []
        for m in range(c.num_mtp_layers):
            with jax.named_scope(f"mtp_{m}"):
                h_BTD, n_BTD, aux = MTPLayer(c, mtp_is_moe(c, m), self.placement, name=f"mtp_{m}")(
                    h_BTD, tokens_BTM[..., m], embed_VD, positions_BT, segment_ids_BT, detach)
            normed.append(n_BTD)
            hidden.append(h_BTD)
            if aux is not None:
                auxes.append(aux)
        if not auxes:
            return MTPOutput(jnp.stack(normed), jnp.stack(hidden), None, None, jnp.zeros((), jnp.float32))
        return MTPOutput(jnp.stack(normed), jnp.stack(hidden), jnp.stack([a["indices"] for a in auxes]),
                         jnp.stack([a["load"] for a in auxes]), jnp.mean(jnp.stack([a["balance_loss"] for a in auxes])))


# ------------------------------------------------------------------------------------------------- parameters


def mtp_head(params: dict, m: int):
    """The LM head depth m+1 uses: its own `head` copy when a checkpoint carries one, else the shared `lm_head`."""
    return params.get("mtp", {}).get(f"mtp_{m}", {}).get("head", params["lm_head"])


def mtp_embedding(params: dict, m: int):
    """The embedding depth m+1 uses: its own copy when present, else the shared one."""
    return params.get("mtp", {}).get(f"mtp_{m}", {}).get("embedding", params["embedding"])


def update_mtp_router_bias(router_state: dict, moe_load_ME, rate: float, cfg: ModelConfig) -> dict:
    """Aux-loss-free balancing of the MTP blocks: b ← b + γ·sign(mean load − load_e), outside the gradient."""
    if rate == 0 or moe_load_ME is None or "mtp" not in router_state:
        return router_state
    delta_ME = rate * jnp.sign(jnp.mean(moe_load_ME, axis=-1, keepdims=True) - moe_load_ME)
    mtp, j = dict(router_state["mtp"]), 0
    for m in range(cfg.num_mtp_layers):
        if mtp_is_moe(cfg, m):
            mtp[f"mtp_{m}"] = jax.tree.map(lambda b, d=delta_ME[j]: b + d, router_state["mtp"][f"mtp_{m}"])
            j += 1
    return dict(router_state, mtp=mtp)
