"""Trainer service: consumes batches of groups and steps the RL objective; its weights are what the orchestrator
publishes as each version (rl/services/local.py, ray_loop.py).

One `train(groups)` call is one weight version:
  1. Dr. GRPO advantages Â = R − mean_group(R) over each task's rollouts (rl/advantages.py);
  2. every segment of every episode packed into [rows, T] chunks carrying its episode's Â, with the sampler's
     log μ, the policy version of each token and the recorded routing (router replay); on device the chunks are
     target-aligned and laid out like CPT batches (sharded over the batch axes, zigzag when mesh.context > 1);
  3. π_prox = the current weights' log-probs of the whole batch (before any update: the first chunk's come from its
     update's own forward, the others' from a pass before it), and π_ref = the reference weights' (the warm start,
     `set_reference`) when the loss has a KL term (kl_coef > 0);
  4. one optimizer update per chunk (PPO minibatches) on the decoupled-PPO loss (+ β·k3(π_θ‖π_ref));
  5. version += 1; the new weights are returned for publication, with their delta statistics.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import jax
import numpy as np

from composer2_jax import sharding as shd
from composer2_jax.episode import Segment
from composer2_jax.losses.rl import PolicyLossConfig
from composer2_jax.model import Transformer
from composer2_jax.model import context_parallel as cp
from composer2_jax.model.layer_plan import moe_layer_ids
from composer2_jax.model.mtp import layout_context
from composer2_jax.model_config import ModelConfig
from composer2_jax.rl.advantages import group_advantages
from composer2_jax.rl.records import GroupRecord, summarize_groups
from composer2_jax.rl.services.rl_step import make_logprob_fn, make_update_fn
from composer2_jax.rl.services.routing import pack_routing
from composer2_jax.rl.services.weight_delta import delta_stats
from composer2_jax.rl.services.weights import Weights
from composer2_jax.rl.trajectory import PackedBatch, first_fit, pack_segments
from composer2_jax.sharding import activate
from composer2_jax.train import optim as optim_lib
from composer2_jax.train.state import TrainState, abstract_train_state, init_train_state, train_state_from

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
    """Packed batch layout of the trainer's updates."""

    rows: int = 32  # packed rows per optimizer update (fixed shape); more rows → more updates per version
    seq_len: int = 640  # T: tokens per packed row (≥ the longest segment)
    router_replay: bool = True  # replay the sampler's experts in the trainer's forward passes
    delta_stats: bool = True  # compute bf16 weight-delta statistics per version
    devices: int = 1  # the trainer's devices: the first N of jax.devices() (0 = all of them)
    mesh: shd.MeshConfig = shd.MeshConfig()  # the trainer mesh's axes over those devices (-1 = the rest)

    def __post_init__(self):
        if self.rows < 1 or self.seq_len < 2 or self.devices < 0:
            raise ValueError(f"trainer.rows={self.rows}, seq_len={self.seq_len}, devices={self.devices}; expected "
                             f">= 1, >= 2, >= 0")

    def make_mesh(self):
        """The trainer's mesh: `mesh` over the first `devices` devices."""
        devices = jax.devices() if self.devices == 0 else jax.devices()[:self.devices]
        if len(devices) < self.devices:
            raise ValueError(f"trainer.devices={self.devices} but only {len(jax.devices())} devices are visible")
        return shd.make_mesh(self.mesh, devices=devices)


# The RL objective by default: decoupled PPO (π_prox/μ weights) with Dr. GRPO's constant normaliser.
RL_LOSS = PolicyLossConfig(aggregation="constant", behav_weight="full")


@dataclasses.dataclass(frozen=True)
class PolicyLaw:
    """The distribution the sampler draws from, which π_θ must equal: softmax at `temperature` over ids below
    `vocab_limit` (0 = the whole vocabulary; set together for rollouts and trainer by `orchestrator.vocab_limit`)."""

    temperature: float = 1.0  # the sampler's temperature
    vocab_limit: int = 0  # the sampler's vocab_limit


def training_items(groups: list[GroupRecord], seq_len: int
                   ) -> tuple[list[tuple[Segment, float | np.ndarray]], list[np.ndarray | None]]:
    """(segment, advantage) items for `pack_segments` and their routing records, every segment trimmed to seq_len.

    Plain groups: every segment of every episode with its episode's Dr. GRPO advantage. Tree groups (branching
    rollouts): `GroupTree.training_items`, one path segment per leaf with per-token edge advantages, shared prefixes
    trained once; a leaf's path is its episode's single segment, so its routing record is that segment's.
    """
    plain = [g for g in groups if g.tree is None]
    advantages = iter(group_advantages(plain))
    items, records = [], []
    for g in groups:
        if g.tree is None:
            pairs = []
            for ep in g.episodes:
                adv = next(advantages)
                pairs += [(seg, rec, adv) for seg, rec in zip(ep.episode.segments, ep.routing)]
        else:
            leaf_items = g.tree.training_items(g.group_relative)
            if len(leaf_items) != len(g.episodes):
                raise ValueError(f"group {g.group_id}: {len(leaf_items)} tree leaves but {len(g.episodes)} episodes; "
                                 "expected one episode per leaf")
            pairs = [(seg, ep.routing[0] if ep.routing else None, adv)
                     for (seg, adv), ep in zip(leaf_items, g.episodes)]
        for seg, rec, adv in pairs:
            if rec is not None and rec.shape[1] != len(seg):
                raise ValueError(f"routing record of {rec.shape[1]} positions for a segment of {len(seg)} tokens")
            seg, rec = trim_segment(seg, rec, seq_len)
            items.append((seg, adv if np.isscalar(adv) else np.asarray(adv)[:len(seg)]))
            records.append(rec)
    return items, records


_COMPILED: dict[tuple, tuple[Any, Any, Any]] = {}


def compiled_steps(model: Transformer, optim: optim_lib.OptimConfig, loss: PolicyLossConfig, law: PolicyLaw,
                   tx) -> tuple[Any, Any, Any]:
    """(optimizer, jitted π_prox log-probs, jitted update) of a configuration, shared by the Trainers of one process
    (a resumed or re-created trainer does not compile again); `tx` is kept from the first such trainer."""
    key = (model.cfg, model.mesh, optim, loss, law)
    if key not in _COMPILED:
        _COMPILED[key] = (tx, jax.jit(make_logprob_fn(model, law.temperature, law.vocab_limit)),
                          jax.jit(make_update_fn(model, tx, loss, law.temperature, law.vocab_limit)))
    return _COMPILED[key]


def trim_segment(seg: Segment, record: np.ndarray | None, seq_len: int) -> tuple[Segment, np.ndarray | None]:
    """The segment without its trailing untrained turns (no loss, pure cost), cut to seq_len tokens if longer.

    Cutting keeps an exact prefix: every kept token's log-prob depends only on the tokens before it.
    """
    last = max((i for i, t in enumerate(seg.turns) if t.trainable), default=len(seg.turns) - 1)
    turns, n = [], 0
    for t in seg.turns[:last + 1]:
        keep = min(len(t.tokens), seq_len - n)
        if keep <= 0:
            break
        turns.append(t if keep == len(t.tokens) else dataclasses.replace(
            t, tokens=t.tokens[:keep], logprobs=None if t.logprobs is None else t.logprobs[:keep]))
        n += keep
    trimmed = Segment(tuple(turns))
    return trimmed, None if record is None else record[:, :len(trimmed)]


def chunk_rows(packed: PackedBatch, rows: int) -> list[slice]:
    """Row slices of `rows` each covering the packed rows that hold anything."""
    used = int(packed.tokens.shape[0])
    return [slice(i, i + rows) for i in range(0, used, rows)]


def target_batch(packed: PackedBatch, rows: slice) -> dict[str, np.ndarray]:
    """The trainer's device arrays of packed rows in target alignment: position t predicts `targets[t]` =
    tokens[t + 1] and carries that token's loss mask, log μ and advantage (0 past a segment's end), so the device
    program never shifts along T (the zigzag layout of context parallelism keeps working)."""
    tok, seg = packed.tokens[rows], packed.segment_ids[rows]
    same = np.zeros(tok.shape, bool)
    same[:, :-1] = (seg[:, 1:] == seg[:, :-1]) & (seg[:, :-1] > 0)

    def ahead(x):  # x[:, t + 1] where t + 1 is in t's segment, else 0
        out = np.zeros_like(x)
        out[:, :-1] = np.where(same[:, :-1], x[:, 1:], 0)
        return out

    return {"tokens": tok, "targets": ahead(tok), "positions": packed.positions[rows], "segment_ids": seg,
            "loss_mask": ahead(packed.loss_mask[rows]), "behav_logprobs": ahead(packed.behav_logprobs[rows]),
            "advantages": ahead(packed.advantages[rows])}


def check_layout(tc: TrainerConfig, mesh, context: int) -> None:
    """ValueError unless the packed rows split over the mesh like a CPT batch (naming both numbers); `context` > 1:
    rows in zigzag layout over that many devices."""
    batch = shd.axis_size(mesh, shd.mesh_axes_of("activation_batch"))
    if tc.rows % batch:
        raise ValueError(f"trainer.rows={tc.rows} is not divisible by the trainer mesh's batch axes "
                         f"{shd.mesh_axes_of('activation_batch')} of size {batch}")
    if context > 1 and tc.seq_len % (2 * context):
        raise ValueError(f"trainer.seq_len={tc.seq_len} is not divisible by 2×context = {2 * context} (the zigzag "
                         f"layout cuts each row into 2·context chunks)")


class Trainer:
    """Owns the train state; `train(groups)` makes the next weight version."""

    def __init__(self, model_cfg: ModelConfig, optim: optim_lib.OptimConfig, tc: TrainerConfig,
                 loss: PolicyLossConfig = RL_LOSS, law: PolicyLaw = PolicyLaw(), mesh=None, seed: int = 0):
        self.model_cfg, self.tc, self.loss, self.law = model_cfg, tc, loss, law
        self.mesh = mesh if mesh is not None else tc.make_mesh()
        self.context = layout_context(model_cfg, self.mesh)  # zigzag rows only under a context-parallel kernel
        check_layout(tc, self.mesh, self.context)
        self.model = Transformer(model_cfg, self.mesh)
        make_tx = lambda p, names: optim_lib.make_optimizer(optim, p, names, self.mesh)  # noqa: E731
        shape = (tc.rows, tc.seq_len)
        self.abstract, self.shardings, self.tx = abstract_train_state(self.model, make_tx, self.mesh, shape)
        self._fresh = lambda: init_train_state(self.model, make_tx, self.mesh, jax.random.key(seed), shape)[0]
        self._state: TrainState | None = None  # a fresh init on first use, unless load_params / restore come first
        self.version = 0
        self.num_moe = len(moe_layer_ids(model_cfg))
        self.tx, self._logp, self._update = compiled_steps(self.model, optim, loss, law, self.tx)
        self._published_host = None
        self.reference = None  # (params, router_state) of π_ref when the loss has a KL term
        if loss.kl_coef > 0:
            self.set_reference(self.state.params, self.state.router_state)  # the start weights

    # ------------------------------------------------------------------------------------------------ state

    @property
    def state(self) -> TrainState:
        """The train state; freshly initialised (seed) if no weights were given before its first use — a trainer
        that starts from a checkpoint (load_params, restore) never compiles the model's init program."""
        if self._state is None:
            self._state = self._fresh()
        return self._state

    @state.setter
    def state(self, value: TrainState) -> None:
        self._state = value

    def load_params(self, params, router_state) -> None:
        """Start from given weights (e.g. the SFT checkpoint) with a fresh optimizer state; they are also the
        reference policy of the KL term."""
        with activate(self.mesh):
            params = jax.device_put(params, self.shardings.params)
            router_state = jax.device_put(router_state, self.shardings.router_state)
        self.state = train_state_from(params, router_state, self.tx, self.shardings, self.mesh)
        self.set_reference(params, router_state)
        self._published_host = None

    def set_reference(self, params, router_state) -> None:
        """The reference policy π_ref of the KL term (a resumed run sets it from the warm start again); kept only
        when the loss has one (kl_coef > 0), since it is a whole second copy of the weights."""
        if self.loss.kl_coef <= 0:
            return
        with activate(self.mesh):
            self.reference = (jax.device_put(params, self.shardings.params),
                              jax.device_put(router_state, self.shardings.router_state))

    def restore(self, state: TrainState, version: int) -> None:
        """Resume from a checkpointed state and version."""
        self.state, self.version = state, version
        self._published_host = None

    @property
    def optimizer_resident(self) -> bool:
        """Whether the optimizer state is on the trainer's devices (False after `offload_optimizer`)."""
        return all(isinstance(x, jax.Array) for x in jax.tree.leaves(self.state.opt_state))

    def offload_optimizer(self) -> None:
        """Colocated placement: move the optimizer state to host memory while the rollout engines hold the devices
        (their page pools and the optimizer state are never resident together)."""
        host = jax.device_get(self.state.opt_state)
        for x in {id(x): x for x in jax.tree.leaves(self.state.opt_state)}.values():
            x.delete()
        self.state = self.state.replace(opt_state=host)

    def reload_optimizer(self) -> None:
        """The optimizer state back onto the trainer's mesh (a no-op when it is there)."""
        if not self.optimizer_resident:
            with activate(self.mesh):
                self.state = self.state.replace(opt_state=jax.device_put(self.state.opt_state,
                                                                         self.shardings.opt_state))

    def weights(self) -> Weights:
        """The current weights as a publishable version."""
        return Weights(self.version, self.state.params, self.state.router_state)

    # ------------------------------------------------------------------------------------------------ batches

    def pack(self, groups: list[GroupRecord]) -> tuple[PackedBatch, np.ndarray | None]:
        """All segments of the batch packed into rows (a multiple of tc.rows), and their routing records."""
        items, records = training_items(groups, self.tc.seq_len)
        needed = 1 + max((r for r, _ in first_fit([len(s) for s, _ in items], self.tc.seq_len)), default=0)
        rows = -(-needed // self.tc.rows) * self.tc.rows
        packed = pack_segments(items, self.tc.seq_len, batch_size=rows)
        routing = None
        if self.num_moe and self.tc.router_replay:
            k = self.model_cfg.num_experts_per_tok
            routing = pack_routing(packed.placements, records, rows, self.tc.seq_len, self.num_moe, k)
        return packed, routing

    def device_batch(self, packed: PackedBatch, rows: slice, routing: np.ndarray | None = None):
        """One chunk on the trainer's mesh: (target-aligned batch, routing [L, B, T, k] or None), zigzag when
        context > 1, sharded like a CPT batch."""
        batch = target_batch(packed, rows)
        if self.context > 1:
            batch = {k: np.asarray(v) for k, v in cp.zigzag_batch(batch, self.context).items()}
            routing = None if routing is None else np.asarray(cp.zigzag(routing, self.context, axis=2))
        tok_sh = jax.sharding.NamedSharding(self.mesh, shd.logical_to_spec(("activation_batch", "activation_length")))
        route_sh = jax.sharding.NamedSharding(self.mesh, shd.logical_to_spec((None, "activation_batch",
                                                                               "activation_length", None)))
        return ({k: jax.device_put(v, tok_sh) for k, v in batch.items()},
                None if routing is None else jax.device_put(routing, route_sh))

    def token_logprobs(self, packed: PackedBatch, rows: slice, routing: np.ndarray | None = None,
                       weights: Weights | None = None) -> np.ndarray:
        """Host [B, T] log π(tokens[b, t]) aligned with `packed.tokens` (0 where no token precedes in the segment)
        under the current weights (or `weights`), with router replay of `routing` [L, B_all, T, k] when given."""
        params, router_state = (self.state.params, self.state.router_state) if weights is None else (
            weights.params, weights.router_state)
        batch, route = self.device_batch(packed, rows, None if routing is None else routing[:, rows])
        with activate(self.mesh):
            lp = np.asarray(jax.device_get(self._logp(params, router_state, batch, route)))
        if self.context > 1:
            lp = np.asarray(cp.unzigzag(lp, self.context))
        return np.concatenate([np.zeros_like(lp[:, :1]), lp[:, :-1]], axis=1)  # log π(targets[t]) is token t + 1

    # ------------------------------------------------------------------------------------------------ a version

    def train(self, groups: list[GroupRecord]) -> dict[str, Any]:
        """One weight version from a batch of groups; returns metrics (loss terms, staleness, weight delta)."""
        packed, routing = self.pack(groups)
        chunks = chunk_rows(packed, self.tc.rows)
        if self.tc.delta_stats and self._published_host is None:  # the base of this version's delta
            self._published_host = jax.device_get(self.state.params)
        with activate(self.mesh):
            placed = [self.device_batch(packed, c, None if routing is None else routing[:, c]) for c in chunks]
            batches, routes = [b for b, _ in placed], [r for _, r in placed]
            # π_prox is this version's starting weights: the first update runs at them and takes its log-probs from
            # its own forward (rl_step.make_update_fn); later chunks need them computed before that update.
            old = [None] + [self._logp(self.state.params, self.state.router_state, b, r)
                            for b, r in zip(batches[1:], routes[1:])]
            ref = [None] * len(batches)
            if self.loss.kl_coef > 0:
                ref = [self._logp(*self.reference, b, r) for b, r in zip(batches, routes)]
            fetched = []
            for b, r, o, q in zip(batches, routes, old, ref):
                self.state, m = self._update(self.state, b, r, o, q)
                fetched.append(m)
        fetched = jax.device_get(fetched)
        self.version += 1
        metrics = {k: float(np.mean([m[k] for m in fetched])) for k in fetched[0] if np.ndim(fetched[0][k]) == 0}
        metrics.update(updates=len(chunks), version=self.version, **_staleness(packed, self.version - 1))
        metrics.update({f"batch/{k}": v for k, v in summarize_groups(groups).items()})
        if self.tc.delta_stats:
            metrics.update({f"weights/{k}": v for k, v in self._delta().items()})
        return metrics

    def _delta(self) -> dict[str, float]:
        """Weight-delta statistics of the new version against the previous one."""
        host = jax.device_get(self.state.params)
        prev, self._published_host = self._published_host, host
        return {} if prev is None else delta_stats(prev, host)



def _staleness(packed: PackedBatch, trainer_version: int) -> dict[str, float]:
    """Token staleness (trainer version − sampling version) over trained tokens: mean and max."""
    v = packed.policy_versions[packed.loss_mask > 0]
    if v.size == 0:
        return {"staleness_mean": 0.0, "staleness_max": 0.0}
    lag = trainer_version - v
    return {"staleness_mean": float(lag.mean()), "staleness_max": float(lag.max())}
