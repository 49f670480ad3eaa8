"""Mixture of experts: DeepSeek-V3 sigmoid routing and a single-device dropless expert computation.

Algorithm for x [B, T, D] (N = B·T tokens, k experts per token):
  1. s = sigmoid(x·W_r) in fp32                                              [N, E]
  2. selection scores s + b, b the aux-loss-free bias (`router_state`, no gradient)
  3. group-limited: score each of G groups by the sum of its top-2, keep the best `topk_group` groups
  4. top-k experts on the masked selection scores (or the recorded indices: router replay)
  5. weights = s at those experts, renormalised to sum 1 (norm_topk_prob), × routed_scaling_factor
  6. sort the N·k (token, expert) pairs by expert, run the experts as grouped matmuls, unsort, weight, sum
  7. add the always-on shared expert
Expert parallelism and backend-specific grouped-matmul kernels build on `route` and `grouped_ffn` here.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
from flax import linen as nn

from composer2_jax.config import ModelConfig
from composer2_jax.model.layers import MLP, constrain, dtype_of, param


class Routing(NamedTuple):
    """The routing decision for N tokens."""

    weights: jax.Array  # [N, k] fp32 combine weights
    indices: jax.Array  # [N, k] int32 expert ids
    scores: jax.Array  # [N, E] fp32 sigmoid affinities (before bias)


def route(logits_NE, bias_E, cfg: ModelConfig, replay_Nk: Optional[jax.Array] = None) -> Routing:
    """DeepSeek-V3 routing: group-limited top-k on sigmoid(logits)+bias, weights from the unbiased scores."""
    scores_NE = jax.nn.sigmoid(logits_NE.astype(jnp.float32))
    if replay_Nk is None:
        choice_NE = scores_NE + jax.lax.stop_gradient(bias_E.astype(jnp.float32))
        choice_NE = _limit_groups(choice_NE, cfg.n_group, cfg.topk_group)
        _, idx_Nk = jax.lax.top_k(choice_NE, cfg.num_experts_per_tok)
    else:
        idx_Nk = replay_Nk
    idx_Nk = idx_Nk.astype(jnp.int32)
    w_Nk = jnp.take_along_axis(scores_NE, idx_Nk, axis=-1)
    if cfg.norm_topk_prob:
        w_Nk = w_Nk / (jnp.sum(w_Nk, axis=-1, keepdims=True) + 1e-20)
    return Routing(w_Nk * cfg.routed_scaling_factor, idx_Nk, scores_NE)


def _limit_groups(choice_NE, n_group: int, topk_group: int):
    """Mask (to -inf) every expert outside the `topk_group` groups with the best top-2 score sums."""
    if n_group == 1:
        return choice_NE
    n, e = choice_NE.shape
    g_NGe = choice_NE.reshape(n, n_group, e // n_group)
    group_score_NG = jnp.sum(jax.lax.top_k(g_NGe, 2)[0], axis=-1)
    _, gidx = jax.lax.top_k(group_score_NG, topk_group)
    keep_NG = jnp.sum(jax.nn.one_hot(gidx, n_group, dtype=jnp.int32), axis=-2) > 0
    keep_NE = jnp.repeat(keep_NG, e // n_group, axis=-1)
    return jnp.where(keep_NE, choice_NE, -jnp.inf)


def grouped_ffn(x_ND, idx_Nk, w_Nk, wi_gate_EDF, wi_up_EDF, wo_EFD):
    """Dropless SwiGLU experts: sort the N·k assignments by expert, grouped matmuls, unsort, combine. [N, D]."""
    n, k = idx_Nk.shape
    e = wi_gate_EDF.shape[0]
    flat = idx_Nk.reshape(-1)  # [N·k]
    order = jnp.argsort(flat, stable=True)
    xs_XD = jnp.take(x_ND, order // k, axis=0)  # [N·k, D], grouped by expert
    sizes_E = jnp.bincount(flat, length=e).astype(jnp.int32)
    h_XF = jax.nn.silu(jax.lax.ragged_dot(xs_XD, wi_gate_EDF, sizes_E)) * jax.lax.ragged_dot(xs_XD, wi_up_EDF, sizes_E)
    ys_XD = jax.lax.ragged_dot(h_XF, wo_EFD, sizes_E)
    y_NkD = jnp.zeros_like(ys_XD).at[order].set(ys_XD).reshape(n, k, -1)
    return jnp.einsum("NkD,Nk->ND", y_NkD.astype(jnp.float32), w_Nk).astype(x_ND.dtype)


def expert_load(idx_Nk, num_experts: int, valid_N=None):
    """Tokens routed to each expert [E] (fp32), counting only valid tokens."""
    one_hot_NkE = jax.nn.one_hot(idx_Nk, num_experts, dtype=jnp.float32)
    if valid_N is not None:
        one_hot_NkE = one_hot_NkE * valid_N[:, None, None]
    return jnp.sum(one_hot_NkE, axis=(0, 1))


def sequence_balance_loss(scores_BTE, idx_BTk, valid_BT):
    """DeepSeek-V3 complementary sequence-wise balance loss Σ_i f_i·P_i, averaged over sequences.

    f_i = E/(k·T) Σ_t 1[i ∈ TopK_t],  P_i = 1/T Σ_t s'_{i,t},  s' = s / Σ_j s_j  (DeepSeek-V3 report, eq. 17-20);
    T counts the valid tokens of each sequence. Multiply by the configured weight α outside.
    """
    e, k = scores_BTE.shape[-1], idx_BTk.shape[-1]
    v_BT = valid_BT.astype(jnp.float32)
    t_B = jnp.maximum(jnp.sum(v_BT, axis=1), 1.0)
    sel_BTE = jnp.sum(jax.nn.one_hot(idx_BTk, e, dtype=jnp.float32), axis=2) * v_BT[..., None]
    f_BE = sel_BTE.sum(1) * e / (k * t_B[:, None])
    p_BTE = scores_BTE / jnp.sum(scores_BTE, axis=-1, keepdims=True) * v_BT[..., None]
    p_BE = p_BTE.sum(1) / t_B[:, None]
    return jnp.mean(jnp.sum(f_BE * p_BE, axis=-1))


class MoE(nn.Module):
    """Routed experts + shared expert. Returns (y [B, T, D], aux) with aux = indices, load, balance_loss."""

    cfg: ModelConfig

    @nn.compact
    def __call__(self, x_BTD, valid_BT=None, replay_BTk=None):
        c = self.cfg
        b, t, d = x_BTD.shape
        e, f = c.n_routed_experts, c.moe_intermediate_size
        pd, dt = dtype_of(c.param_dtype), dtype_of(c.dtype)
        init = nn.initializers.normal(c.initializer_range)
        w_router = param(self, "router", (d, e), ("embed", "exp"), init, jnp.float32)  # router kept fp32
        bias_E = self.variable("router_state", "e_score_correction_bias",
                               nn.with_logical_partitioning(lambda: jnp.zeros((e,), jnp.float32), ("exp",))).value
        x_ND = x_BTD.reshape(b * t, d).astype(dt)
        logits_NE = jnp.einsum("ND,DE->NE", x_ND.astype(jnp.float32), w_router)
        replay = None if replay_BTk is None else replay_BTk.reshape(b * t, -1)
        r = route(logits_NE, bias_E, c, replay)
        wi_gate = param(self, "wi_gate", (e, d, f), ("exp", "embed", "moe_mlp"), init, pd).astype(dt)
        wi_up = param(self, "wi_up", (e, d, f), ("exp", "embed", "moe_mlp"), init, pd).astype(dt)
        wo = param(self, "wo", (e, f, d), ("exp", "moe_mlp", "embed"), init, pd).astype(dt)
        y_BTD = grouped_ffn(x_ND, r.indices, r.weights, wi_gate, wi_up, wo).reshape(b, t, d)
        if c.n_shared_experts:
            y_BTD = y_BTD + MLP(c, f * c.n_shared_experts, name="shared_experts")(x_BTD)
        valid_BT = jnp.ones((b, t), bool) if valid_BT is None else valid_BT
        idx_BTk = r.indices.reshape(b, t, -1)
        aux = dict(indices=idx_BTk, load=expert_load(r.indices, e, valid_BT.reshape(-1).astype(jnp.float32)),
                   balance_loss=sequence_balance_loss(r.scores.reshape(b, t, e), idx_BTk, valid_BT))
        return constrain(y_BTD, ("activation_batch", "activation_length", "activation_embed")), aux
