"""Mixture of experts: DeepSeek-V3 sigmoid routing, the MoE layer, its statistics and the router-bias update.

Algorithm for x [B, T, D] (N = B·T tokens, k experts per token):
  1. s = sigmoid(x·W_r) in fp32                                              [N, E]
  2. selection scores s + b, b the aux-loss-free bias (`router_state`, no gradient)
  3. group-limited: score each of G groups by the sum of its top-2, keep the best `topk_group` groups
  4. top-k experts on the masked selection scores (or the recorded indices: router replay)
  5. weights = s at those experts, renormalised to sum 1 (norm_topk_prob), × routed_scaling_factor
  6. dispatch the N·k (token, expert) pairs to the experts, run them as grouped matmuls, combine (weight, sum)
     — dropless or GShard capacity (`moe_impl`), on one device or across `expert` (model/expert_parallel.py)
  7. add the always-on shared expert (outside any shard_map: plain GSPMD)

Choosing the implementation (config → `MoE`):
  * `moe_impl`: 'dropless' (every assignment computed) | 'capacity' (C slots per expert per dispatch group; the
    overflow is dropped; the dropped fraction is reported)
  * expert parallelism: the caller passes the placement (`MoE(cfg, placement)`, a `sharding.Placement` or a mesh,
    from `Transformer(cfg, mesh)`); `expert_parallelism(cfg, placement)` (model/expert_parallel.py) decides, in one
    place: with `moe_expert_parallel` and a mesh of more than one device, steps 1–6 run per shard inside
    `jax.shard_map` with specs from the placement's rules, and the all-to-alls run over the axis `exp` maps to
    (`expert`) when its size is > 1. Without a mesh (or with `moe_expert_parallel=False`) the same block runs as one
    GSPMD program.
  * `moe_gmm_impl`: the grouped matmul (model/grouped_matmul.py), 'auto' picks per backend.
  * `matmul_precision`: 'fp8' makes every expert matmul (capacity einsum, padded einsum, ragged_dot) and the shared
    expert's block-scaled FP8 (model/fp8.py); `MoE` sets it for the routed experts with `fp8.precision_scope`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Optional

import flax
import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from composer2_jax import sharding as shd
from composer2_jax.model import fp8
from composer2_jax.model.expert_parallel import (
    ExpertParallelism,
    Experts,
    MoEAxes,
    capacity,
    capacity_combine,
    capacity_dispatch,
    check_moe_divisible,
    dropless_ffn,
    ep_combine,
    ep_dispatch,
    ep_experts,
    expert_parallelism,
    overlap_chunks,
    shard_moe,
)
from composer2_jax.model.grouped_matmul import padded_capacity, swiglu_ecd
from composer2_jax.model.layer_plan import SCANNED_STACK, layer_slots
from composer2_jax.model.layers import MLP, dtype_of, param
from composer2_jax.model_config import ModelConfig


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


def grouped_ffn(x_ND, idx_Nk, w_Nk, wi_gate_EDF, wi_up_EDF, wo_EFD, impl: str = "auto"):
    """Dropless SwiGLU experts on one device: sort the N·k assignments by expert, grouped matmuls, unsort. [N, D]."""
    return dropless_ffn(x_ND, idx_Nk, w_Nk, Experts(wi_gate_EDF, wi_up_EDF, wo_EFD), impl)


# ------------------------------------------------------------------------------------------------- statistics


def expert_load(idx_Nk, num_experts: int, valid_N=None):
    """Tokens routed to each expert [E] (fp32), counting only valid tokens."""
    v_N = jnp.ones(idx_Nk.shape[:1], jnp.float32) if valid_N is None else valid_N.astype(jnp.float32)
    v_X = jnp.broadcast_to(v_N[:, None], idx_Nk.shape).reshape(-1)
    return jnp.zeros((num_experts,), jnp.float32).at[idx_Nk.reshape(-1)].add(v_X)


def balance_terms(scores_BTE, idx_BTk, valid_BT):
    """Per-sequence sums of the balance loss: (selections [B, E], normalised scores [B, E], valid tokens [B])."""
    b, _, e = scores_BTE.shape
    v_BT = valid_BT.astype(jnp.float32)
    rows_BTk = jnp.broadcast_to(jnp.arange(b)[:, None, None], idx_BTk.shape)
    sel_BE = jnp.zeros((b, e), jnp.float32).at[rows_BTk, idx_BTk].add(
        jnp.broadcast_to(v_BT[..., None], idx_BTk.shape))
    p_BE = jnp.einsum("BTE,BT->BE", scores_BTE / jnp.sum(scores_BTE, axis=-1, keepdims=True), v_BT)
    return sel_BE, p_BE, jnp.sum(v_BT, axis=1)


def balance_from_terms(sel_BE, p_BE, t_B, k: int):
    """Per-sequence balance loss Σ_i f_i·P_i [B] from the summed terms (see `sequence_balance_loss`)."""
    e = sel_BE.shape[-1]
    t_B = jnp.maximum(t_B, 1.0)[:, None]
    return jnp.sum(sel_BE * e / (k * t_B) * (p_BE / t_B), axis=-1)


def sequence_balance_loss(scores_BTE, idx_BTk, valid_BT):
    """DeepSeek-V3 complementary sequence-wise balance loss Σ_i f_i·P_i, averaged over sequences.

    f_i = E/(k·T) Σ_t 1[i ∈ TopK_t],  P_i = 1/T Σ_t s'_{i,t},  s' = s / Σ_j s_j  (DeepSeek-V3 report, eq. 17-20);
    T counts the valid tokens of each sequence. Multiply by the configured weight α outside.
    """
    return jnp.mean(balance_from_terms(*balance_terms(scores_BTE, idx_BTk, valid_BT), idx_BTk.shape[-1]))


def router_entropy_sum(scores_NE, valid_N):
    """Σ over valid tokens of the entropy of the normalised router scores s/Σs (nats)."""
    p_NE = scores_NE / jnp.sum(scores_NE, axis=-1, keepdims=True)
    h_N = -jnp.sum(p_NE * jnp.log(jnp.maximum(p_NE, 1e-30)), axis=-1)
    return jnp.sum(h_N * valid_N)


# ------------------------------------------------------------------------------------------------- the block

SINGLE_DEVICE = MoEAxes()  # no mesh axes: the block sees every token and every expert


class RoutedWeights(NamedTuple):
    """The router and the routed experts' weights of one MoE layer (this program's experts)."""

    router_DE: jax.Array  # [D, E] fp32
    bias_E: jax.Array  # [E] the aux-loss-free routing bias
    wi_gate: jax.Array  # [E_w, D, F]
    wi_up: jax.Array  # [E_w, D, F]
    wo: jax.Array  # [E_w, F, D]


def moe_block(x_BTD, valid_BT, replay_BTk, w: RoutedWeights, *, cfg: ModelConfig, axes: MoEAxes = SINGLE_DEVICE):
    """Route and run the routed experts on one shard's tokens (or all of them without a mesh).

    Returns (y [B, T, D], indices [B, T, k], stats, balance loss per sequence [B]); stats are sums over all tokens
    (psum over the token axes inside shard_map): load [E], dropped, assigned, entropy, tokens.
    """
    b, t, d = x_BTD.shape
    e, k = cfg.n_routed_experts, cfg.num_experts_per_tok
    x_ND = x_BTD.reshape(b * t, d)
    valid_N = valid_BT.reshape(-1).astype(jnp.float32)
    logits_NE = jnp.einsum("ND,DE->NE", x_ND.astype(jnp.float32), w.router_DE)
    r = route(logits_NE, w.bias_E, cfg, None if replay_BTk is None else replay_BTk.reshape(b * t, k))
    check_overlap_chunks(b * t, cfg.moe_overlap_chunks, f" ({b} sequences × {t} positions)")
    experts = Experts(w.wi_gate, w.wi_up, w.wo)
    y_ND, kept_Nk = _routed_experts(x_ND, r, valid_N, experts, cfg, axes)
    if axes.tensor:
        y_ND = jax.lax.psum(y_ND, axes.tensor)
    stats = dict(load=expert_load(r.indices, e, valid_N), tokens=jnp.sum(valid_N), assigned=k * jnp.sum(valid_N),
                 dropped=jnp.sum(jnp.where(kept_Nk, 0.0, valid_N[:, None])),
                 entropy=router_entropy_sum(r.scores, valid_N))
    terms = balance_terms(r.scores.reshape(b, t, e), r.indices.reshape(b, t, k), valid_BT)
    if axes.tokens:
        stats = jax.lax.psum(stats, axes.tokens)
    if axes.length:
        terms = jax.lax.psum(terms, axes.length)
    return y_ND.reshape(b, t, d), r.indices.reshape(b, t, k), stats, balance_from_terms(*terms, k)


def check_overlap_chunks(n_tokens: int, chunks: int, where: str = ""):
    """ValueError naming both numbers unless `chunks` (model.moe_overlap_chunks) divides the MoE block's tokens."""
    if n_tokens % chunks:
        divisors = [c for c in range(1, n_tokens + 1) if n_tokens % c == 0]
        raise ValueError(f"model.moe_overlap_chunks={chunks} does not divide the {n_tokens} tokens each MoE shard "
                         f"holds{where}; expected a divisor of {n_tokens} (one of {divisors})")


def _routed_experts(x_ND, r: Routing, valid_N, experts: Experts, cfg: ModelConfig, axes: MoEAxes):
    """Dispatch, experts and combine of one shard's N tokens: (y [N, D], kept [N, k] bool).

    With model.moe_overlap_chunks = C > 1 the N tokens are cut into C contiguous chunks that run as a software
    pipeline (`overlap_chunks`): chunk i+1's dispatch all-to-all is issued before chunk i's expert FFN and chunk
    i's combine all-to-all depends on nothing of chunk i+1, so the compiled program may overlap them. Dropless,
    every token's result is the same as with C = 1. Capacity mode gives every expert C_c = ceil(factor·(N/C)·k/E)
    slots per chunk (each chunk is its own GShard dispatch group): C = 1 is exactly today's behaviour; with C > 1
    which assignments are dropped can differ (priority runs within a chunk), and the slots total C·C_c ≥ the
    unchunked C_1.
    """
    n, k = r.indices.shape
    e = cfg.n_routed_experts
    c = cfg.moe_overlap_chunks
    nc = n // c
    cut = lambda a, i: a[i * nc:(i + 1) * nc]  # noqa: E731  chunk i of a per-token array
    if cfg.moe_impl == "capacity":
        slots = capacity(nc, k, e, cfg.moe_capacity_factor)
        e_loc = experts.wi_gate.shape[0]
        outs = overlap_chunks(
            c, lambda i: capacity_dispatch(cut(x_ND, i), cut(r.indices, i), e_loc, slots, cut(valid_N, i),
                                           axes.expert),
            lambda i, sent: swiglu_ecd(sent.x_ECD, *experts),
            lambda i, sent, y: capacity_combine(sent, y, cut(r.weights, i), axes.expert))
        return (jnp.concatenate([o[0] for o in outs]) if c > 1 else outs[0][0],
                jnp.concatenate([o[1] for o in outs]) if c > 1 else outs[0][1])
    if axes.expert:
        ax, impl, slack = axes.expert, cfg.moe_gmm_impl, cfg.moe_dropless_slack
        outs = overlap_chunks(
            c, lambda i: ep_dispatch(cut(x_ND, i), cut(r.indices, i), experts.wi_gate.shape[0], ax),
            lambda i, sent: ep_experts(sent, experts, impl, slack),
            lambda i, sent, y: ep_combine(sent, y, cut(r.weights, i), ax))
    else:  # one device: no collective to overlap; chunked all the same, so every mesh computes alike
        slots = padded_capacity(nc * k, e, cfg.moe_dropless_slack)
        outs = overlap_chunks(
            c, lambda i: i, lambda i, _: dropless_ffn(cut(x_ND, i), cut(r.indices, i), cut(r.weights, i), experts,
                                                      cfg.moe_gmm_impl, slots),
            lambda i, _, y: y)
    return (jnp.concatenate(outs) if c > 1 else outs[0]), jnp.ones((n, k), bool)


def run_moe_block(x_BTD, valid_BT, replay_BTk, w: RoutedWeights, cfg: ModelConfig, ep: ExpertParallelism):
    """`moe_block` as `ep` (from `expert_parallelism`) says: one program, under shard_map over `ep.mesh`, or as is
    inside a per-shard program."""
    if ep.mode == "off":
        return moe_block(x_BTD, valid_BT, replay_BTk, w, cfg=cfg)
    axes = ep.axes
    with_replay = replay_BTk is not None

    def body(x, valid, *rest):
        replay, rest = (rest[0], rest[1:]) if with_replay else (None, rest)
        return moe_block(x, valid, replay, RoutedWeights(*rest), cfg=cfg, axes=axes)

    args = (x_BTD, valid_BT) + ((replay_BTk,) if with_replay else ()) + tuple(w)
    if ep.mode == "per_shard":
        # Already per shard (the pipeline's per-shard schedule, model/pipeline.py `_run_per_shard`): the arrays are
        # the local blocks shard_moe's specs would cut, so the body runs as is; the per-sequence balance losses
        # come back for the whole batch, as shard_moe's output spec assembles them.
        y, idx, stats, seq_loss_B = body(*args)
        if axes.batch:
            seq_loss_B = jax.lax.all_gather(seq_loss_B, axes.batch, axis=0, tiled=True)
        return y, idx, stats, seq_loss_B
    b, t, _ = x_BTD.shape
    check_moe_divisible(axes, ep.mesh, b, t, cfg.n_routed_experts, cfg.moe_intermediate_size)
    return shard_moe(body, ep.mesh, axes, with_replay)(*args)


class MoE(nn.Module):
    """Routed experts + shared expert. Returns (y [B, T, D], aux): indices, load, balance_loss, dropped, entropy."""

    cfg: ModelConfig
    # where it runs: a `sharding.Placement`, or a mesh (the project's rules); None: one GSPMD program, no constraints
    placement: Optional[shd.Placement | jax.sharding.Mesh] = None

    @nn.compact
    def __call__(self, x_BTD, valid_BT=None, replay_BTk=None):
        c = self.cfg
        placement = shd.Placement.of(self.placement)
        ep = expert_parallelism(c, placement)
        b, t, d = x_BTD.shape
        e, f = c.n_routed_experts, c.moe_intermediate_size
        pd, dt = dtype_of(c.param_dtype), dtype_of(c.dtype)
        init = nn.initializers.normal(c.initializer_range)
        w_router = param(self, "router", (d, e), ("embed", "exp"), init, jnp.float32)  # router kept fp32
        bias_E = self.variable("router_state", "e_score_correction_bias",
                               nn.with_logical_partitioning(lambda: jnp.zeros((e,), jnp.float32), ("exp",))).value
        e_w = ep.local_experts  # this device's experts only inside a per-shard program (model/pipeline.py)
        wi_gate = param(self, "wi_gate", (e_w, d, f), ("exp", "embed", "moe_mlp"), init, pd).astype(dt)
        wi_up = param(self, "wi_up", (e_w, d, f), ("exp", "embed", "moe_mlp"), init, pd).astype(dt)
        wo = param(self, "wo", (e_w, f, d), ("exp", "moe_mlp", "embed"), init, pd).astype(dt)
        valid_BT = jnp.ones((b, t), bool) if valid_BT is None else valid_BT
        with fp8.precision_scope(c.matmul_precision):  # the expert SwiGLUs' matmuls (model/grouped_matmul.py)
            y_BTD, idx_BTk, stats, seq_loss_B = run_moe_block(
                x_BTD.astype(dt), valid_BT, replay_BTk, RoutedWeights(w_router, bias_E, wi_gate, wi_up, wo), c, ep)
        if c.n_shared_experts:
            y_BTD = y_BTD + MLP(c, f * c.n_shared_experts, placement, name="shared_experts")(x_BTD)
        aux = dict(indices=idx_BTk, load=stats["load"], balance_loss=jnp.mean(seq_loss_B),
                   dropped=stats["dropped"] / jnp.maximum(stats["assigned"], 1.0),
                   entropy=stats["entropy"] / jnp.maximum(stats["tokens"], 1.0))
        return placement.constrain(y_BTD, ("activation_batch", "activation_length", "activation_embed")), aux


# ------------------------------------------------------------------------------- router bias update and metrics


def update_router_bias(router_state, moe_load, gamma: float, cfg: ModelConfig):
    """Aux-loss-free balancing (DeepSeek-V3 §2.1.2): b_e ← b_e + γ·sign(mean load − load_e), outside the gradient.

    Args:
      router_state: the `router_state` collection (per MoE layer `.../moe/e_score_correction_bias`; [U, E] in the
        scanned stack).
      moe_load: `ModelOutput.moe_load` [L_moe, E], MoE layers in model order (summed over micro-batches is fine).
      gamma: the bias update speed γ.
      cfg: the model's config: which layers are MoE and where their biases live (`model/layer_plan.py`).
    Returns:
      The updated router_state (same tree, shapes and dtypes).
    """
    load_LE = jax.lax.stop_gradient(jnp.asarray(moe_load, jnp.float32))
    delta_LE = gamma * jnp.sign(jnp.mean(load_LE, axis=-1, keepdims=True) - load_LE)
    slots = [s for s in layer_slots(cfg, scanned=SCANNED_STACK in router_state) if s.moe]
    if len(slots) != load_LE.shape[0]:
        raise ValueError(f"the config has {len(slots)} MoE layers but moe_load has {load_LE.shape[0]} rows")
    rows: dict[tuple, list[int]] = {}
    for j, slot in enumerate(slots):
        rows.setdefault(slot.path, []).append(j)
    new = flax.core.unfreeze(router_state)
    for path, js in rows.items():
        moe = functools.reduce(lambda node, key: node[key], path, new)["moe"]
        bias = moe["e_score_correction_bias"]
        moe["e_score_correction_bias"] = (bias + delta_LE[np.asarray(js)].reshape(bias.shape)).astype(bias.dtype)
    return flax.core.freeze(new) if isinstance(router_state, flax.core.FrozenDict) else new


def moe_metrics(output) -> dict:
    """Per-step MoE metrics from a `ModelOutput` (empty for a dense model); loads count routed (token, expert) pairs.

    moe/load [L, E] · moe/max_over_mean [L] and its max over layers moe/max_over_mean_max · moe/dropped_fraction
    (mean over layers; 0 when dropless) · moe/router_entropy (nats, mean over layers) · moe/balance_loss.
    """
    if output.moe_load is None:
        return {}
    load_LE = output.moe_load.astype(jnp.float32)
    ratio_L = jnp.max(load_LE, axis=-1) / jnp.maximum(jnp.mean(load_LE, axis=-1), 1e-9)
    m = {"moe/load": load_LE, "moe/max_over_mean": ratio_L, "moe/max_over_mean_max": jnp.max(ratio_L),
         "moe/balance_loss": output.balance_loss}
    if getattr(output, "moe_dropped", None) is not None:
        m["moe/dropped_fraction"] = jnp.mean(output.moe_dropped)
    if getattr(output, "router_entropy", None) is not None:
        m["moe/router_entropy"] = jnp.mean(output.router_entropy)
    return m
