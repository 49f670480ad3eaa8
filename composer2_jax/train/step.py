"""The jitted training step: gradient accumulation, chunked CE + MoE balance loss, clipping, non-finite guard,
the optimizer update and the aux-loss-free router-bias update (outside the gradient)."""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import optax

from composer2_jax import sharding as shd
from composer2_jax.losses.lm import Chunks, after, chunked_cross_entropy
from composer2_jax.losses.mtp import (
    MTPLossConfig,
    MTPSums,
    chunked_mtp_sums,
    distill_weight,
    mtp_metrics,
    mtp_objective,
    mtp_weight,
    teacher_hidden,
)
from composer2_jax.model import Transformer
from composer2_jax.model.layer_plan import layer_plan
from composer2_jax.model.moe import update_router_bias
from composer2_jax.model.mtp import layout_context, mtp_batch, mtp_head, shift_left, update_mtp_router_bias
from composer2_jax.model.pipeline import pipeline_spec
from composer2_jax.train.optim import qk_clip
from composer2_jax.train.state import TrainState

BATCH_KEYS = ("tokens", "targets", "loss_mask", "segment_ids", "positions")


@dataclasses.dataclass(frozen=True)
class StepConfig:
    """What the step needs beyond the model and the optimizer."""

    grad_accum: int = 1  # micro-batches per step (the global batch is split, gradients summed)
    loss_chunk: int = 1024  # tokens per chunk of the chunked cross-entropy (peak logits memory = chunk × vocab)
    balance_loss_weight: float = 1e-4  # α of the sequence-wise MoE balance loss (DeepSeek-V3: 1e-4)
    z_loss_weight: float = 0.0  # weight of the logsumexp² z-loss (0 = off)
    router_bias_rate: float = 1e-3  # γ of the aux-loss-free routing-bias update (DeepSeek-V3: 1e-3)
    skip_nonfinite: bool = False  # NaN/inf loss: False stops the run naming the step; True skips the update
    mtp: MTPLossConfig = MTPLossConfig()  # the MTP loss (losses/mtp.py); used when model.num_mtp_layers > 0

    def __post_init__(self):
        if self.grad_accum < 1 or self.loss_chunk < 1:
            raise ValueError(f"step.grad_accum={self.grad_accum}, step.loss_chunk={self.loss_chunk}; expected >= 1")
        if min(self.balance_loss_weight, self.z_loss_weight, self.router_bias_rate) < 0:
            raise ValueError(f"step.balance_loss_weight={self.balance_loss_weight}, z_loss_weight="
                             f"{self.z_loss_weight}, router_bias_rate={self.router_bias_rate}; expected >= 0")


def microbatches(batch: dict, n: int) -> dict:
    """[B, T] leaves → [n, B/n, T] for gradient accumulation."""
    b = batch["tokens"].shape[0]
    if b % n:
        raise ValueError(f"batch size {b} is not divisible by grad_accum={n}")
    return jax.tree.map(lambda x: x.reshape((n, b // n) + x.shape[1:]), batch)


def make_train_step(model: Transformer, tx: optax.GradientTransformation, sc: StepConfig,
                    lr_fn: Optional[optax.Schedule] = None, qk_clip_tau: Optional[float] = None) -> Callable:
    """A pure `step(state, batch) -> (state, metrics)`; jit it with donate_argnums=0.

    `qk_clip_tau` (the optimizer's MuonClip τ, `OptimConfig.qk_clip_tau`) turns on QK-clip after each update.
    """

    cfg = model.cfg
    mtp_on = cfg.num_mtp_layers > 0 and sc.mtp.enabled
    chunks = Chunks(sc.loss_chunk, model.placement)  # the loss chunks, constrained on the model's placement
    pipe = pipeline_spec(cfg, model.mesh, layer_plan(cfg)[2])
    if pipe is not None and qk_clip_tau:
        raise ValueError(f"QK-clip (optim.qk_clip_tau={qk_clip_tau}) needs every layer's max logits, which the "
                         f"pipelined stack (mesh stage={pipe.stages}) does not collect")

    def loss_fn(params, router_state, mb, n_tokens, n_mtp_M, lam, w_sd):
        kw = dict(mtp_tokens=mb["mtp_tokens"], mtp_detach=sc.mtp.detach_trunk) if mtp_on else {}
        variables = {"params": params, "router_state": router_state}
        args = (mb["tokens"], mb["positions"], mb["segment_ids"])
        max_logits = None
        if qk_clip_tau:  # also collect every attention layer's per-head max logit (MuonClip)
            out, inter = model.apply(variables, *args, compute_logits=False, mutable=["intermediates"], **kw)
            max_logits = inter["intermediates"]
        else:
            out = model.apply(variables, *args, compute_logits=False, **kw)
        ce = chunked_cross_entropy(out.normed, params["lm_head"], mb["targets"], mb["loss_mask"], chunks)
        loss = (ce.loss_sum + sc.z_loss_weight * ce.z_loss_sum) / n_tokens \
            + sc.balance_loss_weight * out.balance_loss / sc.grad_accum
        sums, mtp_load = _mtp_zeros(cfg, mtp_on), None
        if mtp_on:
            out = out._replace(mtp=out.mtp._replace(normed=after(out.mtp.normed, ce.loss_sum)))  # losses in turn
            sums = mtp_loss_sums(params, out, mb, cfg, sc, layout_context(cfg, model.mesh), model.placement)
            loss = loss + mtp_objective(sums, n_mtp_M, lam, sc.mtp, w_sd) \
                + sc.balance_loss_weight * out.mtp.balance_loss / sc.grad_accum
            mtp_load = out.mtp.moe_load
        return loss, (ce, out.moe_load, out.balance_loss, sums, mtp_load, max_logits)

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def step(state: TrainState, batch: dict):
        n_tokens = jnp.maximum(jnp.sum(batch["loss_mask"].astype(jnp.float32)), 1.0)
        if mtp_on and "mtp_tokens" not in batch:  # shifted in natural order (model/mtp.py), whatever the layout
            batch = {**batch, **mtp_batch(batch, cfg.num_mtp_layers, layout_context(cfg, model.mesh))}
        n_mtp_M = jnp.sum(batch["mtp_mask"].astype(jnp.float32), axis=(0, 1)) if mtp_on else None
        lam, w_sd = mtp_weight(state.step, sc.mtp), distill_weight(state.step, sc.mtp)
        mbs = microbatches(batch, sc.grad_accum)

        def accumulate(carry, mb):
            grads, loss, ce_sum, correct, load, bal, mtp_s, mtp_ld, mx = carry
            (l, (ce, ld, b, ms, mld, m)), g = grad_fn(state.params, state.router_state, mb, n_tokens, n_mtp_M,
                                                      lam, w_sd)
            add = lambda a, c: a + c  # noqa: E731
            return (jax.tree.map(add, grads, g), loss + l, ce_sum + ce.loss_sum, correct + ce.correct,
                    None if load is None else load + ld, bal + b, jax.tree.map(add, mtp_s, ms),
                    None if mtp_ld is None else mtp_ld + mld,
                    None if m is None else jax.tree.map(jnp.maximum, mx, m)), None

        zeros = jax.tree.map(jnp.zeros_like, state.params)
        load0 = _load_zeros(model)
        mx0 = _max_logit_init(model, state, mbs) if qk_clip_tau else None
        init = (zeros, jnp.zeros(()), jnp.zeros(()), jnp.zeros(()), load0, jnp.zeros(()), _mtp_zeros(cfg, mtp_on),
                _mtp_load_zeros(cfg, mtp_on), mx0)
        (grads, loss, ce_sum, correct, load, bal, mtp_sums, mtp_load, mx), _ = jax.lax.scan(accumulate, init, mbs)
        grad_norm = optax.tree_utils.tree_norm(grads)
        finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        if qk_clip_tau:
            params = apply_qk_clip(params, mx, qk_clip_tau)
        router_state = state.router_state
        if load is not None and sc.router_bias_rate:
            router_state = update_router_bias(router_state, load, sc.router_bias_rate, model.cfg)
        router_state = update_mtp_router_bias(router_state, mtp_load, sc.router_bias_rate, cfg)
        new = TrainState(step=state.step + 1, params=params, opt_state=opt_state, router_state=router_state)
        if sc.skip_nonfinite:  # keep the old state (but count the step) when the loss or gradient is not finite
            new = jax.tree.map(lambda a, b: jnp.where(finite, a, b), new, state.replace(step=state.step + 1))
        metrics = dict(loss=loss, ce=ce_sum / n_tokens, accuracy=correct / n_tokens, grad_norm=grad_norm,
                       tokens=n_tokens, finite=finite, balance_loss=bal / sc.grad_accum)
        if mx is not None:
            metrics["max_attention_logit"] = jnp.max(jnp.stack([jnp.max(x) for x in jax.tree.leaves(mx)]))
        if lr_fn is not None:
            metrics["lr"] = lr_fn(state.step)
        if pipe is not None:  # idle share of each stage: (S − 1) / (M·R + S − 1)
            metrics["pipeline_bubble"] = jnp.float32(pipe.bubble)
        if load is not None:
            metrics["moe_load"] = load
            metrics["moe_max_over_mean"] = jnp.max(load) / jnp.maximum(jnp.mean(load), 1e-9)
        if mtp_on:
            metrics.update(mtp_metrics(mtp_sums, lam))
            metrics["mtp/loss"] = mtp_objective(mtp_sums, n_mtp_M, lam, sc.mtp, w_sd)
            metrics["mtp/distill_weight"] = w_sd
        return new, metrics

    return step


def mtp_loss_sums(params, out, mb, cfg, sc: StepConfig, context: int = 1,
                  placement: shd.Placement = shd.Placement()) -> MTPSums:
    """Per-depth MTP sums of one micro-batch: students = MTP depths, teacher = the main head k positions ahead
    (`context` > 1: the batch is in zigzag layout over that many devices); the chunks are constrained on
    `placement` (the model's)."""
    teacher = teacher_hidden(jax.lax.stop_gradient(out.normed), cfg.num_mtp_layers,
                             lambda x, k: shift_left(x, k, context=context))
    heads = [mtp_head(params, m) for m in range(cfg.num_mtp_layers)]
    if sc.mtp.detach_trunk:  # only the MTP modules learn from this loss
        heads = [jax.lax.stop_gradient(w) for w in heads]
    return chunked_mtp_sums(out.mtp.normed, teacher, heads, params["lm_head"], mb["mtp_targets"], mb["mtp_mask"],
                            top_n=sc.mtp.distill_top_n, chunk=Chunks(sc.loss_chunk, placement))


def _mtp_zeros(cfg, on: bool) -> MTPSums:
    """Zero per-depth MTP sums ([M], or [0] when MTP is off) for the accumulation carry."""
    z = jnp.zeros((cfg.num_mtp_layers if on else 0,), jnp.float32)
    return MTPSums(z, z, z, z, z)


def _mtp_load_zeros(cfg, on: bool):
    """Zeros shaped like MTPOutput.moe_load ([M_moe, E]), or None."""
    from composer2_jax.model.mtp import mtp_is_moe

    n = sum(mtp_is_moe(cfg, m) for m in range(cfg.num_mtp_layers)) if on else 0
    return jnp.zeros((n, cfg.n_routed_experts), jnp.float32) if n else None


def _max_logit_init(model: Transformer, state: TrainState, mbs: dict):
    """−inf tree shaped like the sown per-layer max logits (for the running max over micro-batches)."""
    mb = jax.tree.map(lambda x: x[0], mbs)
    kw = {"mtp_tokens": mb["mtp_tokens"]} if "mtp_tokens" in mb else {}  # MTP blocks sow their max logits too
    shapes = jax.eval_shape(lambda p, r: model.apply({"params": p, "router_state": r}, mb["tokens"],
                                                     mb["positions"], mb["segment_ids"], compute_logits=False,
                                                     mutable=["intermediates"], **kw)[1]["intermediates"],
                            state.params, state.router_state)
    return jax.tree.map(lambda s: jnp.full(s.shape, -jnp.inf, s.dtype), shapes)


def apply_qk_clip(params: dict, max_logits: dict, tau: float) -> dict:
    """MuonClip: rescale every attention layer whose per-head max logit exceeds τ (optim.qk_clip)."""
    out = dict(params)
    for name, sub in max_logits.items():
        if name == "attn" and "max_logit" in sub:
            out["attn"] = qk_clip(params["attn"], sub["max_logit"][0], tau)
        elif isinstance(sub, dict) and name in params:
            out[name] = apply_qk_clip(params[name], sub, tau)
    return out


def _load_zeros(model: Transformer):
    """Zeros shaped like ModelOutput.moe_load ([L_moe, E]), or None for a dense model."""
    cfg = model.cfg
    n_moe = sum(cfg.is_moe_layer(i) for i in range(cfg.num_layers))
    return jnp.zeros((n_moe, cfg.n_routed_experts), jnp.float32) if n_moe else None


def batch_shardings(mesh, rules=None) -> dict:
    """NamedShardings of the batch leaves: [B, T] over (activation_batch, activation_length)."""
    spec = shd.logical_to_spec(("activation_batch", "activation_length"), rules or shd.LOGICAL_RULES)
    return {k: jax.sharding.NamedSharding(mesh, spec) for k in BATCH_KEYS}


def eval_loss_fn(model: Transformer, sc: StepConfig) -> Callable:
    """`(params, router_state, batch) -> (ce_sum, count)` for held-out evaluation."""

    def f(params, router_state, batch):
        out = model.apply({"params": params, "router_state": router_state}, batch["tokens"], batch["positions"],
                          batch["segment_ids"], compute_logits=False)
        ce = chunked_cross_entropy(out.normed, params["lm_head"], batch["targets"], batch["loss_mask"],
                                   Chunks(sc.loss_chunk, model.placement))
        return ce.loss_sum, ce.count

    return f


