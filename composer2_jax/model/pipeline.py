"""Pipeline parallelism over the `stage` mesh axis: the scanned decoder stack under a circular (interleaved) schedule.

Layout. The scanned stack's U units (params [U, ...], logical axis `layers` → mesh axis `stage`) are cut into
S·R virtual stages of L = U/(S·R) units (S stages, R = `pipeline_repeats`); virtual stage v = r·S + s runs units
[v·L, (v+1)·L) on stage s. Stage s thus holds the units of v = s, S+s, 2S+s, ...:
  R = 1: contiguous blocks, exactly how `layers` is sharded over `stage` (no parameter movement);
  R > 1: [U] → [R, S, L] regroups the unit axis (one all-to-all of the stack's parameters over `stage` per step,
         and its transpose for the gradients).

Schedule (the circular pipeline of MaxText; the forward order of Narayanan et al. 2021's interleaved schedule).
The batch [B, T] is split into M microbatches (M ≥ S). At iteration i = 0 .. M·R + S − 2 stage s works on item
j = i − s when 0 ≤ j < M·R: microbatch m = j mod M in repeat r = j div M.
  1. stage 0 takes microbatch m from the buffer: the embedded input while r = 0, afterwards what stage S − 1
     finished for m in repeat r − 1 (written M − S + 1 ≥ 1 iterations earlier, since M ≥ S)
  2. every stage runs the L units of its virtual stage r·S + s on its item: `jax.vmap` over the stage axis with
     `spmd_axis_name='stage'`, so each stage's devices run one slice (MoE expert parallelism, ring attention and
     FSDP gathers inside a stage work as without a pipeline, over the remaining axes)
  3. the outputs move one stage on, S − 1 → 0 closing the circle: `jax.lax.ppermute` in a shard_map over `stage`
  4. what stage 0 received from stage S − 1 is written to the buffer under its microbatch
Stage s idles for S − 1 of the M·R + S − 1 iterations: bubble = (S − 1) / (M·R + S − 1). Items in the bubble
compute on zeros or stale activations; their outputs and MoE statistics are masked out. `schedule_table` lists
which (microbatch, repeat) each stage runs at each iteration; tests/test_pipeline_schedule.py derives the bubble
from it and the planner reads the loops' trip count from the compiled program (plan/hlo.py
`schedule_trip_counts`).
Backward: autodiff of the scan replays the schedule in reverse (a ppermute transposes to the opposite shift) and
sums each stage's parameter gradients over its microbatches.

Why this schedule, and why autodiff rather than a hand-written 1F1B. R = `pipeline_repeats` is the number v of
model chunks per device of Megatron-LM's interleaved 1F1B (Narayanan et al. 2021, "Efficient Large-Scale Language
Model Training on GPU Clusters Using Megatron-LM", §2.2.2: bubble time (p − 1)/v of a microbatch's forward +
backward against m of them, i.e. a fraction (p − 1)/(v·m + p − 1) of the step, p = S stages, m = M microbatches),
laid out as MaxText's circular pipeline (`pipeline_parallel_layers`, `num_pipeline_repeats`; praxis's
`CircularLayerwiseShardablePipelined`): the same forward order, with the backward as the scan's reverse, so
forward and backward each idle for S − 1 of M·R + S − 1 ticks — the same fraction as interleaved 1F1B.
  * GPipe (R = 1, M = S) has (S − 1)/(2S − 1) = 42.9 % at S = 4; R > 1 divides the idle ticks' share without more
    microbatches (R = 5, M = S = 4: 3/23 = 13.0 %), which matters where the global batch caps M (a microbatch
    is split over the stage's data×fsdp×expert devices, so M ≤ B / that product).
  * What 1F1B buys over GPipe is memory, not bubble: a stage holds at most S microbatches' activations instead of
    M. Here the same bound comes from checkpointing each stage step whole (`remat_stage`): the backward keeps
    one [mb, T, D] stage input per tick, (M·R + S − 1)·mb = R·B + (S − 1)·B/M rows per stage group — fixed in M
    at a given global batch B (larger M: smaller microbatches) — and recomputes the L units of one tick at a
    time. So M ≥ 4·S costs no activation memory; R costs R× the stage inputs (and the parameter regroup below).
  * Gradients by jax autodiff of the forward schedule, not an explicit forward/backward interleaving: the
    transpose of ppermute, of the buffer updates and of the masked bubble items is exact by construction
    (tests check params − gradients and the router-bias update against the single-device step at SHARDED_FP32),
    the stage body keeps its own remat policy, MoE shard_map and ring attention unchanged, and a hand-scheduled
    1F1B would need its own VJP of every one of them. An interleaved 1F1B's earlier backward start would not
    shrink the bubble fraction further, only the activation memory, which the stage checkpoint already bounds.

The buffer is kept per stage ([S, M, mb, T, D], sharded over `stage`) so reads and writes stay local; the final
outputs leave stage 0 once, for the final norm, head, MTP and loss, which run outside the pipeline with the batch
split over `stage` as well (the rules table's `activation_batch`), so no stage repeats them.

Memory. Each microbatch is split over the same mesh axes (`batch_axes`) in the buffers as inside the stage body,
where the rules drop `stage` (sharding.within_stage): the stage vmap, the residual stream's constraints and the MoE
shard_map's token split agree, so GSPMD needs no resharding (before, it replicated whole activations between them).
Each stage step is checkpointed whole (`remat_stage`): per iteration the backward pass keeps the stage's input
[S, mb, T, D] and recomputes its L units, instead of keeping L units' residuals for each of the M·R + S − 1
iterations.

Parameter gathers (model.pipeline_gather_params). The stage body runs inside the schedule's loop, so GSPMD
gathers a stage's FSDP-sharded parameters there: once per iteration forward and again in the backward's
recompute, M·R + S − 1 times per step, and reduces each iteration's weight gradients there too (they are sums
over a batch split across devices). With the option on, on meshes with tensor = context = 1 (`local_specs`), the
schedule runs as one per-shard program (`_run_per_shard`, a shard_map over every mesh axis): each leaf is
all-gathered over the axes its per-device block drops (FSDP; `expert` for all but the routed experts' weights)
once before the loop; the backward loop accumulates each
device's partial gradient of that block with no collective; the gather's transpose (a reduce-scatter over the
FSDP axes, in the param dtype) and the sum over the axes the block is replicated on run once, after the loop.
tests/test_pipeline_parallel.py counts both kinds of collectives inside and outside the loops. With tensor or
context > 1 (`gather_specs`) the staged parameters are only constrained, before the loop, to a layout without
the FSDP axes (one all-gather per step); their gradient reductions stay inside the backward loop.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

STAGE_AXIS = "stage"


class PipelineSpec(NamedTuple):
    """The static shape of one pipelined stack."""

    stages: int  # S: size of the `stage` mesh axis
    repeats: int  # R: virtual stages per stage (circular schedule)
    microbatches: int  # M: microbatches per pipelined batch
    units_per_stage: int  # L: scanned units per virtual stage

    @property
    def iterations(self) -> int:
        """M·R + S − 1 schedule steps (each stage busy for M·R of them)."""
        return self.microbatches * self.repeats + self.stages - 1

    @property
    def bubble(self) -> float:
        """Idle fraction of every stage: (S − 1) / (M·R + S − 1)."""
        return bubble_fraction(self.stages, self.microbatches, self.repeats)


def bubble_fraction(stages: int, microbatches: int, repeats: int = 1) -> float:
    """(S − 1) / (M·R + S − 1): the share of schedule iterations in which a stage has no work."""
    return (stages - 1) / (microbatches * repeats + stages - 1)


def schedule_table(spec: PipelineSpec) -> list[tuple]:
    """The schedule as a table: for each of the `spec.iterations` ticks, per stage s, the (microbatch, repeat)
    item stage s runs (virtual stage repeat·S + s on that microbatch), or None when it idles (the bubble).
    Stage s runs item j = tick − s, j = repeat·M + microbatch, for 0 ≤ j < M·R (module docstring)."""
    m_, r_ = spec.microbatches, spec.repeats
    rows = []
    for tick in range(spec.iterations):
        row = []
        for s in range(spec.stages):
            j = tick - s
            row.append((j % m_, j // m_) if 0 <= j < m_ * r_ else None)
        rows.append(tuple(row))
    return rows


def stage_count(mesh) -> int:
    """Size of the `stage` axis of `mesh` (1 without a mesh or without the axis)."""
    if mesh is None or STAGE_AXIS not in mesh.axis_names:
        return 1
    return int(dict(mesh.shape)[STAGE_AXIS])


def runs_per_shard(cfg, mesh_shape) -> bool:
    """Whether the schedule runs as one per-shard program (`_run_per_shard`: parameters gathered once before the
    loop, gradients reduced once after it): model.pipeline_gather_params on a mesh (axis name → size) with
    tensor = context = 1; otherwise GSPMD partitions the schedule (module docstring)."""
    return bool(cfg.pipeline_gather_params) and mesh_shape.get("tensor", 1) * mesh_shape.get("context", 1) == 1


def pipeline_spec(cfg, mesh, n_units: int) -> Optional[PipelineSpec]:
    """The schedule of `cfg`'s scanned stack of `n_units` units on `mesh`; None when `stage` is 1 (no pipeline)."""
    s = stage_count(mesh)
    if s == 1:
        return None
    r = cfg.pipeline_repeats
    m = cfg.pipeline_microbatches or s
    if not cfg.scan_layers:
        raise ValueError(f"pipeline parallelism (mesh stage={s}) pipelines the scanned stack; model.scan_layers=False")
    if n_units % (s * r):
        raise ValueError(f"the scanned stack has {n_units} units, not divisible by mesh stage={s} × "
                         f"model.pipeline_repeats={r} = {s * r} virtual stages")
    if m < s:
        raise ValueError(f"model.pipeline_microbatches={m} is fewer than mesh stage={s}: the circular schedule "
                         f"needs at least one microbatch per stage")
    return PipelineSpec(s, r, m, n_units // (s * r))


def _stage_sharded(x, mesh, inner: tuple = ()):
    """Constrain the leading axis of `x` to `stage`, the next ones to `inner`, the rest free for the partitioner."""
    spec = P(STAGE_AXIS, *inner, *([P.UNCONSTRAINED] * (x.ndim - 1 - len(inner))))
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, spec))


def to_stages(tree, spec: PipelineSpec, mesh):
    """Stack leaves [U, ...] → [S, R, L, ...]: unit (r·S + s)·L + l lands at [s, r, l]."""
    s, r, l = spec.stages, spec.repeats, spec.units_per_stage

    def one(a):
        a = a.reshape((r, s, l) + a.shape[1:])
        return _stage_sharded(jnp.swapaxes(a, 0, 1), mesh)

    return jax.tree.map(one, tree)


def gather_stage_params(params_S, gather_specs, mesh):
    """Constrain staged leaves [S, R, L, ...] to P(`stage`, None, None, *spec): gathered over the axes `spec` omits
    (the FSDP axes), still split over `stage` and over the axes `spec` names (`expert`, `tensor`)."""
    def one(a, spec):
        spec = tuple(spec) + (None,) * (a.ndim - 3 - len(tuple(spec)))
        return jax.lax.with_sharding_constraint(a, NamedSharding(mesh, P(STAGE_AXIS, None, None, *spec)))

    return jax.tree.map(one, params_S, gather_specs, is_leaf=lambda x: isinstance(x, P))


def from_stages(tree, spec: PipelineSpec):
    """The inverse of `to_stages` for per-unit results: [S, R, L, ...] → [U, ...] in unit order."""
    return jax.tree.map(lambda a: jnp.swapaxes(a, 0, 1).reshape((-1,) + a.shape[3:]), tree)


def shift_to_next_stage(x_S, mesh):
    """Stage s's slice of `x_S` [S, ...] moves to stage s + 1 (S − 1 → 0): one collective permute over `stage`."""
    n = stage_count(mesh)
    perm = [(i, (i + 1) % n) for i in range(n)]
    spec = P(STAGE_AXIS)
    return jax.shard_map(lambda x_: jax.lax.ppermute(x_, STAGE_AXIS, perm), mesh=mesh, in_specs=spec,
                         out_specs=spec, axis_names={STAGE_AXIS})(x_S)


class StackInputs(NamedTuple):
    """What enters the pipelined stack: the whole batch ([B, ...]) or, inside the schedule, its microbatches
    ([M, mb, ...]). Arrays only (a pytree under jit / shard_map)."""

    x: jax.Array  # [B, T, D] | [M, mb, T, D] the residual stream
    positions: jax.Array  # [B, T] | [M, mb, T]
    segment_ids: Optional[jax.Array] = None  # [B, T] | [M, mb, T], or None (one document per row)


@dataclasses.dataclass(frozen=True)
class PipelineLayout:
    """How the schedule lays out its buffers and parameters: static options, never traced (module docstring)."""

    # the mesh axes (not `stage`) that split a microbatch inside a stage; the schedule's buffers are constrained to
    # them so they match the layout of `stage_fn`'s activations
    batch_axes: tuple[str, ...] = ()
    # checkpoint each stage step whole (`jax.checkpoint`): the backward pass keeps only the stage's input per
    # schedule iteration and recomputes its L units (under their own remat policy) when it gets there
    remat_stage: bool = True
    # None, or a tree like `params_U` of PartitionSpecs of one unit's leaf (without the unit axis) with the FSDP
    # axes dropped: the staged parameters are constrained to (`stage`, -, -, *spec) before the schedule loop, so
    # they are gathered once per step rather than at every iteration
    gather_specs: Any = None
    # None, or a tree like `params_U` of (param_spec, local_spec) pairs of one unit's leaf: the schedule then runs
    # per shard (`_run_per_shard`): each leaf, laid out by `param_spec` (its FSDP layout), is all-gathered over the
    # axes `local_spec` does not keep, once, before the loop; its gradient accumulates per device through the
    # backward loop and is reduce-scattered once after it
    local_specs: Any = None

    @property
    def batch(self):
        """The batch axes as a PartitionSpec entry (None: not split)."""
        return tuple(self.batch_axes) or None


class _Carry(NamedTuple):
    """The schedule's loop state."""

    state_S: jax.Array  # [S, mb, T, D] what each stage received from the previous one
    buf_S: jax.Array  # [S, M, mb, T, D] per-microbatch inputs / circulating outputs (stage 0's copy is read)
    aux_S: object  # per-unit MoE statistics summed over microbatches, leaves [S, R, L, ...], or None


def run_pipeline(stage_fn: Callable, params_U, router_U, inputs: StackInputs, spec: PipelineSpec, mesh,
                 layout: PipelineLayout = PipelineLayout()):
    """Run the scanned stack under the circular schedule (module docstring).

    Args:
      stage_fn: `(params_L, router_L, x_bTD, positions_bT, segment_ids_bT) -> (y_bTD, aux)`: L scanned units on
        one microbatch; aux leaves are per-unit sums [L, ...] (or aux is None).
      params_U, router_U: the stack's parameters and router state, leaves [U, ...].
      inputs: the whole batch entering the stack (x [B, T, D], positions [B, T], segment ids [B, T] or None).
      spec: the schedule (`pipeline_spec`).
      mesh: the mesh with the `stage` axis.
      layout: the buffers' batch axes, whether each stage step is checkpointed, and how the staged parameters are
        gathered (`PipelineLayout`: none, once per step under GSPMD, or per shard).

    Returns:
      (y_BTD, aux): the stack's output and the per-unit aux summed over microbatches, leaves [U, ...].
    """
    s_, m_, r_ = spec.stages, spec.microbatches, spec.repeats
    b, t, d = inputs.x.shape
    if b % m_:
        raise ValueError(f"batch {b} is not divisible by model.pipeline_microbatches={m_}")
    mb = b // m_
    batch = layout.batch

    def split(a):  # [B, ...] → [M, mb, ...], each microbatch split like the activations inside a stage
        if a is None:
            return None
        a = jnp.asarray(a).reshape((m_, mb) + a.shape[1:])
        return jax.lax.with_sharding_constraint(a, NamedSharding(mesh, P(None, batch)))

    micro = StackInputs(*map(split, inputs))
    x_M, pos_M, seg_M = micro
    params_S, router_S = to_stages(params_U, spec, mesh), to_stages(router_U, spec, mesh)
    if layout.local_specs is not None:
        return _run_per_shard(stage_fn, params_S, router_S, micro, spec, mesh, layout)
    if layout.gather_specs is not None:
        params_S = gather_stage_params(params_S, layout.gather_specs, mesh)
    stage_ids_S = jnp.arange(s_)
    first_S = (stage_ids_S == 0)[:, None, None, None]

    def run_stages(i, x_S):
        """Step 2: every stage's item of iteration i → (y [S, mb, T, D], aux [S, L, ...], valid [S], repeat [S])."""
        j_S = i - stage_ids_S
        valid_S = (j_S >= 0) & (j_S < m_ * r_)
        j_S = jnp.clip(j_S, 0, m_ * r_ - 1)
        m_S, r_S = j_S % m_, j_S // m_

        def one(p, rs, x, m, r):
            pick = lambda tree: jax.tree.map(lambda a: a[r], tree)  # noqa: E731  this repeat's L units
            seg = None if seg_M is None else seg_M[m]
            return stage_fn(pick(p), pick(rs), x, pos_M[m], seg)

        if layout.remat_stage:
            one = jax.checkpoint(one, prevent_cse=False)  # inside a scan: no CSE across iterations to prevent

        y_S, aux = jax.vmap(one, spmd_axis_name=STAGE_AXIS)(params_S, router_S, x_S, m_S, r_S)
        return y_S, aux, valid_S, r_S

    def body(c: _Carry, i):
        with jax.named_scope("pipeline_stage_input"):  # step 1
            x_S = jnp.where(first_S, c.buf_S[:, i % m_], c.state_S)
        with jax.named_scope("pipeline_stages"):  # step 2
            y_S, aux, valid_S, r_S = run_stages(i, x_S)
        with jax.named_scope("pipeline_send"):  # step 3
            state_S = shift_to_next_stage(y_S, mesh)
        with jax.named_scope("pipeline_collect"):  # step 4
            j_last = i - (s_ - 1)
            slot = jnp.clip(j_last, 0, m_ * r_ - 1) % m_
            keep = (j_last >= 0) & first_S
            buf_S = c.buf_S.at[:, slot].set(jnp.where(keep, state_S, c.buf_S[:, slot]))
        aux_S = c.aux_S
        if aux is not None:
            hit_SR = (jax.nn.one_hot(r_S, r_, dtype=jnp.float32) * valid_S[:, None].astype(jnp.float32))

            def add(acc, a):  # acc [S, R, L, ...] += hit [S, R] ⊗ a [S, L, ...]
                w = hit_SR.reshape(hit_SR.shape + (1,) * (a.ndim - 1))
                return acc + w * a[:, None].astype(acc.dtype)

            aux_S = jax.tree.map(add, c.aux_S, aux)
        return _Carry(state_S, buf_S, aux_S), None

    buf_S = _stage_sharded(jnp.broadcast_to(x_M[None], (s_,) + x_M.shape), mesh, (None, batch))
    state_S = _stage_sharded(jnp.zeros((s_, mb, t, d), inputs.x.dtype), mesh, (batch,))
    aux0 = _aux_zeros(stage_fn, params_S, router_S, micro, spec)
    carry, _ = jax.lax.scan(body, _Carry(state_S, buf_S, aux0), jnp.arange(spec.iterations))
    y_BTD = carry.buf_S[0].reshape(b, t, d)
    aux = None if carry.aux_S is None else from_stages(carry.aux_S, spec)
    return y_BTD, aux


def _aux_zeros(stage_fn, params_S, router_S, micro: StackInputs, spec: PipelineSpec):
    """fp32 zeros [S, R, L, ...] shaped like one stage's aux (None when the stack has no MoE layers)."""
    pick = lambda tree: jax.tree.map(lambda a: a[0, 0], tree)  # noqa: E731
    seg = None if micro.segment_ids is None else micro.segment_ids[0]
    shapes = jax.eval_shape(lambda: stage_fn(pick(params_S), pick(router_S), micro.x[0], micro.positions[0], seg)[1])
    if shapes is None:
        return None
    lead = (spec.stages, spec.repeats)
    return jax.tree.map(lambda a: jnp.zeros(lead + a.shape, jnp.float32), shapes)


def _gather_plan(param_spec: P, local_spec: P):
    """[(dim, axes)]: the all-gathers that turn a block in `param_spec`'s layout into one in `local_spec`'s
    (dims of one unit's leaf; the axes a dim keeps must lead its split)."""
    plan = []
    for dim, have in enumerate(tuple(param_spec)):
        keep = tuple(local_spec)[dim] if dim < len(tuple(local_spec)) else None
        have = () if have is None else (have,) if isinstance(have, str) else tuple(have)
        keep = () if keep is None else (keep,) if isinstance(keep, str) else tuple(keep)
        drop = tuple(ax for ax in have if ax not in keep)
        if drop:
            if have[:len(keep)] != keep:
                raise ValueError(f"cannot gather a dimension split over {have} down to {keep}: kept axes must lead")
            plan.append((dim, drop))
    return plan


def _shard_gather(a, param_spec: P, local_spec: P):
    """Inside the per-shard program: one leaf's local block [1, R, L, ...] in `param_spec`'s layout → the block of
    `local_spec`, all-gathered over the axes it does not keep; its gradient is reduce-scattered back."""
    plan = _gather_plan(param_spec, local_spec)

    @jax.custom_vjp
    def gather(x):
        for dim, axes in plan:
            x = jax.lax.all_gather(x, axes, axis=3 + dim, tiled=True)
        return x

    def fwd(x):
        return gather(x), None

    def bwd(_, ct):
        for dim, axes in reversed(plan):
            ct = jax.lax.psum_scatter(ct, axes, scatter_dimension=3 + dim, tiled=True)
        return (ct,)

    gather.defvjp(fwd, bwd)
    return gather(a)


def _run_per_shard(stage_fn, params_S, router_S, micro: StackInputs, spec: PipelineSpec, mesh,
                   layout: PipelineLayout):
    """The circular schedule as one per-shard program (`jax.shard_map` over every mesh axis), with the stage's
    parameters gathered once before the loop and their gradients reduced once after it (model.pipeline_gather_params).

    Under GSPMD the stage body's weight gradients are sums over a batch split across devices, so every iteration
    of the backward loop all-reduces them (a partitioner has no "partial sum" layout for a loop-carried value).
    Here the loop is per shard: the gathered weights are a loop-invariant input of the per-device program, so the
    backward loop accumulates each device's partial gradient in the gathered layout with no collective, and the
    gathers' transposes (a reduce-scatter over the FSDP axes per leaf, and the shard_map's sum over the axes a leaf
    is replicated on, e.g. `expert` for attention weights) run once, after the loop. The stage body sees local
    blocks: the MoE block runs its per-shard body directly (its all-to-all and statistics sums over the named
    axes), sharding constraints are no-ops (sharding.Placement.constrain), the stage axis is this device's one stage.
    """
    s_, m_, r_ = spec.stages, spec.microbatches, spec.repeats
    x_M, pos_M, seg_M = micro
    batch, local_specs = layout.batch, layout.local_specs
    perm = [(i, (i + 1) % s_) for i in range(s_)]
    is_pair = lambda x: isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], P)  # noqa: E731
    param_in = jax.tree.map(lambda ps: P(STAGE_AXIS, None, None, *ps[0]), local_specs, is_leaf=is_pair)
    router_in = jax.tree.map(lambda a: P(STAGE_AXIS), router_S)
    tok = P(None, batch)
    with_seg = seg_M is not None

    def per_shard(params_S, router_S, x_M, pos_M, seg_M, ids_S):
        # params: [1, R, L, ...] local blocks in the FSDP layout → gathered (once per step, outside the loop)
        params = jax.tree.map(lambda a, ps: _shard_gather(a, ps[0], ps[1])[0], params_S, local_specs,
                              is_leaf=is_pair)
        router = jax.tree.map(lambda a: a[0], router_S)
        sid = ids_S[0]
        first = sid == 0
        seg = seg_M if with_seg else None

        def one(p, rs, x, m, r):
            pick = lambda tree: jax.tree.map(lambda a: a[r], tree)  # noqa: E731  this repeat's L units
            return stage_fn(pick(p), pick(rs), x, pos_M[m], None if seg is None else seg[m])

        if layout.remat_stage:
            one = jax.checkpoint(one, prevent_cse=False)

        def body(c: _Carry, i):
            with jax.named_scope("pipeline_stage_input"):
                x = jnp.where(first, c.buf_S[i % m_], c.state_S)
            with jax.named_scope("pipeline_stages"):
                j = i - sid
                valid = (j >= 0) & (j < m_ * r_)
                j = jnp.clip(j, 0, m_ * r_ - 1)
                y, aux = one(params, router, x, j % m_, j // m_)
            with jax.named_scope("pipeline_send"):
                state = jax.lax.ppermute(y, STAGE_AXIS, perm)
            with jax.named_scope("pipeline_collect"):
                j_last = i - (s_ - 1)
                slot = jnp.clip(j_last, 0, m_ * r_ - 1) % m_
                keep = (j_last >= 0) & first
                buf = c.buf_S.at[slot].set(jnp.where(keep, state, c.buf_S[slot]))
            aux_acc = c.aux_S
            if aux is not None:
                hit_R = jax.nn.one_hot(j // m_, r_, dtype=jnp.float32) * valid.astype(jnp.float32)

                def add(acc, a):  # acc [R, L, ...] += hit [R] ⊗ a [L, ...]
                    return acc + hit_R.reshape(hit_R.shape + (1,) * a.ndim) * a[None].astype(acc.dtype)

                aux_acc = jax.tree.map(add, c.aux_S, aux)
            return _Carry(state, buf, aux_acc), None

        shapes = jax.eval_shape(lambda: one(params, router, x_M[0], 0, 0)[1])
        aux0 = None if shapes is None else jax.tree.map(lambda a: jnp.zeros((r_,) + a.shape, jnp.float32), shapes)
        carry, _ = jax.lax.scan(body, _Carry(jnp.zeros_like(x_M[0]), x_M, aux0), jnp.arange(spec.iterations))
        return carry.buf_S[None], None if carry.aux_S is None else jax.tree.map(lambda a: a[None], carry.aux_S)

    ids_S = jnp.arange(s_, dtype=jnp.int32)
    aux_out = P(STAGE_AXIS)
    fn = jax.shard_map(per_shard, mesh=mesh,
                       in_specs=(param_in, router_in, tok, tok, tok if with_seg else None, P(STAGE_AXIS)),
                       out_specs=(P(STAGE_AXIS, None, batch), aux_out), check_vma=False)
    buf_S, aux_S = fn(params_S, router_S, x_M, pos_M, seg_M, ids_S)
    b = x_M.shape[0] * x_M.shape[1]
    y_BTD = buf_S[0].reshape((b,) + x_M.shape[2:])
    aux = None if aux_S is None else from_stages(aux_S, spec)
    return y_BTD, aux
