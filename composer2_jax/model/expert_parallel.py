"""Token dispatch to experts and back: on one device, and across the `expert` mesh axis inside `jax.shard_map`.

Dropless expert parallelism, per shard (names ending in `_` are per-shard values; n shards on the expert axis,
E_ = E/n local experts, X_ = N_·k local (token, expert) assignments):
  1. sort the X_ assignments by global expert; experts are laid out shard-major, so the rows for each destination
     shard are contiguous                                                                       xs [X_, D]
  2. exchange the exact per-expert counts: all_to_all of counts [n, E_] gives, for every source shard, how many
     rows it sends to each of my local experts; all_gather of the per-shard totals gives the send matrix [n, n]
  3. all-to-all the rows: `ragged_all_to_all` moves exactly the counted rows where the platform has it (GPU, TPU);
     elsewhere (CPU) `ragged_all_to_all_padded` pads each message to X_ rows and uses `all_to_all`. Both write
     source s's rows at offset Σ_{s'<s} count(s'→me) of a receive buffer of n·X_ rows (the dropless worst case)
  4. recover each received row's local expert and its slot in that expert's group from the counts
  5. local grouped SwiGLU over E_ experts (`grouped_matmul.grouped_swiglu`: padded einsum or ragged_dot)
  6. the reverse ragged all-to-all returns every row to the offset it left from (the transposed offsets)
  7. unsort, weight by the router weights, sum over the k experts of each token; psum over `tensor` when the expert
     FFN width is split there.
Capacity mode (GShard): each shard gives every global expert C slots; assignments take slots in priority order (all
first choices in token order, then all second choices, ...; padding tokens last) and the overflow is dropped.
The [E, C, D] buffer goes through one dense `all_to_all` to [E_, n·C, D], a batched einsum, and back.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from composer2_jax import sharding as shd
from composer2_jax.model.grouped_matmul import group_starts, grouped_swiglu, padded_capacity, swiglu_ecd

RAGGED_A2A_BACKENDS = ("gpu", "cuda", "rocm", "tpu")


class Experts(NamedTuple):
    """SwiGLU weights of the (local) experts."""

    wi_gate: jax.Array  # [E, D, F]
    wi_up: jax.Array  # [E, D, F]
    wo: jax.Array  # [E, F, D]


class SortPlan(NamedTuple):
    """The N·k assignments of N tokens sorted by expert (X = N·k rows)."""

    order: jax.Array  # [X] assignment id (token·k + slot) of each sorted row
    token: jax.Array  # [X] token of each sorted row
    expert: jax.Array  # [X] expert of each sorted row (non-decreasing)
    pos: jax.Array  # [X] slot of each sorted row within its expert's group
    sizes: jax.Array  # [E] rows per expert


# ------------------------------------------------------------------------------------------------ local pieces


def capacity(n_tokens: int, k: int, n_experts: int, factor: float) -> int:
    """GShard slots per expert for one dispatch group: ceil(factor · tokens·k / E), at least 1."""
    return max(1, math.ceil(factor * n_tokens * k / n_experts))


def sort_by_expert(idx_Nk, n_experts: int, priority_Nk=None) -> SortPlan:
    """Stable sort of the assignments by expert; within an expert by `priority_Nk` (lower first), then token order."""
    n, k = idx_Nk.shape
    flat_X = idx_Nk.reshape(-1)  # [X] assignment a = token·k + slot
    if priority_Nk is None:
        order_X = jnp.argsort(flat_X, stable=True)
    else:
        by_pri = jnp.argsort(priority_Nk.reshape(-1), stable=True)
        order_X = by_pri[jnp.argsort(flat_X[by_pri], stable=True)]
    order_X = order_X.astype(jnp.int32)
    expert_X = flat_X[order_X]
    sizes_E = jnp.zeros((n_experts,), jnp.int32).at[flat_X].add(1)
    pos_X = jnp.arange(n * k, dtype=jnp.int32) - group_starts(sizes_E)[expert_X]
    return SortPlan(order_X, order_X // k, expert_X, pos_X, sizes_E)


def capacity_priority(n: int, k: int, valid_N=None):
    """GShard priority of each assignment [N, k]: by choice rank (slot), padding tokens after all real ones."""
    pri_Nk = jnp.broadcast_to(jnp.arange(k, dtype=jnp.int32), (n, k))
    if valid_N is None:
        return pri_Nk
    return pri_Nk + k * (1 - valid_N.astype(jnp.int32))[:, None]


def weighted_sum(y_XD, w_Nk):
    """Sum each token's k expert outputs (rows in assignment order token·k + slot) weighted by the router. [N, D]."""
    n, k = w_Nk.shape
    y_NkD = y_XD.reshape(n, k, -1)  # [N, k, D]
    return jnp.einsum("NkD,Nk->ND", y_NkD.astype(jnp.float32), w_Nk).astype(y_XD.dtype)


def unsort(v_X, plan: SortPlan, shape=None):
    """A per-sorted-row value back in assignment order (optionally reshaped, e.g. to [N, k])."""
    out = jnp.zeros_like(v_X).at[plan.order].set(v_X)
    return out if shape is None else out.reshape(shape)


def combine(ys_XD, plan: SortPlan, w_Nk):
    """Expert outputs in sorted order back to assignment order, then `weighted_sum`. [N, D]."""
    x = plan.order.shape[0]
    inv_X = unsort(jnp.arange(x, dtype=jnp.int32), plan)  # sorted row of each assignment
    return weighted_sum(jnp.take(ys_XD, inv_X, axis=0), w_Nk)


def dropless_ffn(x_ND, idx_Nk, w_Nk, experts: Experts, impl: str = "auto", slot_capacity: Optional[int] = None):
    """Single-device dropless experts: slots from a sort by expert, grouped SwiGLU straight from x, combine. [N, D].

    Only integer indices are sorted: each assignment reads its token's row once into the expert layout and its
    output is read back once in assignment order.
    """
    n, k = idx_Nk.shape
    plan = sort_by_expert(idx_Nk, experts.wi_gate.shape[0])
    pos_X = unsort(plan.pos, plan)  # slot of each assignment within its expert
    token_X = jnp.arange(n * k, dtype=jnp.int32) // k
    y_XD = grouped_swiglu(x_ND, idx_Nk.reshape(-1), pos_X, plan.sizes, experts, impl=impl,
                          capacity=slot_capacity, src_R=token_X)  # [N·k, D] in assignment order
    return weighted_sum(y_XD, w_Nk)


# ------------------------------------------------------------------------------------------- ragged collectives


def ragged_all_to_all_padded(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, *,
                             axis_name: str, chunk: int):
    """`lax.ragged_all_to_all` semantics from a dense `all_to_all` of messages padded to `chunk` rows (any backend)."""
    r = jnp.arange(chunk, dtype=jnp.int32)
    rows_nC = input_offsets[:, None] + r  # [n, chunk] rows of the operand in each message
    send_nCD = jnp.take(operand, rows_nC, axis=0, mode="fill", fill_value=0)
    keep_nC = (r < send_sizes[:, None]).reshape((-1, chunk) + (1,) * (operand.ndim - 1))
    send_nCD = jnp.where(keep_nC, send_nCD, 0)
    recv_nCD = jax.lax.all_to_all(send_nCD, axis_name, 0, 0, tiled=True)  # block s came from shard s
    at_n = jax.lax.all_to_all(output_offsets, axis_name, 0, 0, tiled=True)  # where block s goes in my output
    dest_nC = jnp.where(r < recv_sizes[:, None], at_n[:, None] + r, output.shape[0])
    return output.at[dest_nC.reshape(-1)].set(recv_nCD.reshape((-1,) + operand.shape[1:]), mode="drop")


def ragged_all_to_all_native(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, *,
                             axis_name: str, chunk: int):
    """`lax.ragged_all_to_all` (exact bytes on the wire); `chunk` is unused."""
    del chunk
    return jax.lax.ragged_all_to_all(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes,
                                     axis_name=axis_name)


def ragged_collective(backend: Optional[str] = None):
    """The ragged exchange for this backend: native on GPU/TPU, padded all-to-all elsewhere (XLA:CPU lacks it)."""
    native = (backend or jax.default_backend()) in RAGGED_A2A_BACKENDS
    return ragged_all_to_all_native if native else ragged_all_to_all_padded


def _exclusive_cumsum(a, axis=0):
    return jnp.cumsum(a, axis=axis) - a


def _received_groups(recv_nE, recv_off_n, n_rows: int):
    """(local expert, slot in its group) of every row of the receive buffer; rows past the data get expert E_."""
    n, e_loc = recv_nE.shape
    p_R = jnp.arange(n_rows, dtype=jnp.int32)
    src_R = jnp.clip(jnp.searchsorted(recv_off_n, p_R, side="right") - 1, 0, n - 1)  # [R] source shard
    r_R = p_R - recv_off_n[src_R]  # row within the source's message
    cum_nE = jnp.cumsum(recv_nE, axis=1)  # [n, E_] message-local group ends
    e_R = jnp.sum(r_R[:, None] >= cum_nE[src_R], axis=1).astype(jnp.int32)
    e_c = jnp.minimum(e_R, e_loc - 1)
    base_nE = _exclusive_cumsum(recv_nE, axis=0)  # [n, E_] rows of earlier sources in each group
    pos_R = base_nE[src_R, e_c] + r_R - (cum_nE[src_R, e_c] - recv_nE[src_R, e_c])
    valid_R = p_R < jnp.sum(recv_nE)
    return jnp.where(valid_R, e_R, e_loc), pos_R


class EPDispatch(NamedTuple):
    """One dispatch group's rows after the dispatch all-to-all (`ep_dispatch`), what `ep_experts` and `ep_combine`
    need."""

    plan: SortPlan  # the group's local assignments sorted by global expert
    recv_RD: jax.Array  # [R, D] received rows (R = n·X_, the dropless worst case)
    e_R: jax.Array  # [R] local expert of each received row (E_: padding)
    pos_R: jax.Array  # [R] slot of each received row within its local expert
    sizes_E: jax.Array  # [E_] rows received per local expert
    send_n: jax.Array  # [n] rows I sent to each shard
    recv_n: jax.Array  # [n] rows each shard sent me
    recv_off_n: jax.Array  # [n] where each source's rows start in recv_RD
    back_off_n: jax.Array  # [n] where each source keeps the rows it sent me


def ep_dispatch(x_ND_, idx_Nk_, n_local_experts: int, axis: str, collective=None) -> EPDispatch:
    """Steps 1–4 of dropless expert parallelism (module docstring): sort, exchange counts, all-to-all the rows."""
    collective = collective or ragged_collective()
    n = jax.lax.axis_size(axis)
    me = jax.lax.axis_index(axis)
    e_loc = n_local_experts
    plan = sort_by_expert(idx_Nk_, n * e_loc)
    x_rows = plan.order.shape[0]
    xs_XD_ = jnp.take(x_ND_, plan.token, axis=0)  # [X_, D] grouped by expert, so by destination shard
    counts_nE_ = plan.sizes.reshape(n, e_loc)  # [n, E_] rows I send to each shard, per its local expert
    recv_nE_ = jax.lax.all_to_all(counts_nE_, axis, 0, 0, tiled=True)  # [n, E_] rows each source sends me
    send_n_, recv_n_ = counts_nE_.sum(1), recv_nE_.sum(1)
    sent_nn = jax.lax.all_gather(send_n_, axis)  # [src, dst] rows sent, the same on every shard
    in_off_n_, recv_off_n_ = _exclusive_cumsum(send_n_), _exclusive_cumsum(recv_n_)
    out_off_n_ = _exclusive_cumsum(sent_nn, axis=0)[me]  # where my rows land on each destination
    back_off_n_ = _exclusive_cumsum(sent_nn, axis=1)[:, me]  # where each source keeps the rows it sent me
    r_rows = n * x_rows
    d = x_ND_.shape[-1]
    recv_RD_ = collective(xs_XD_, jnp.zeros((r_rows, d), xs_XD_.dtype), in_off_n_, send_n_, out_off_n_, recv_n_,
                          axis_name=axis, chunk=x_rows)  # [R, D]
    e_R_, pos_R_ = _received_groups(recv_nE_, recv_off_n_, r_rows)
    return EPDispatch(plan, recv_RD_, e_R_, pos_R_, recv_nE_.sum(0), send_n_, recv_n_, recv_off_n_, back_off_n_)


def ep_experts(sent: EPDispatch, experts_: Experts, impl: str = "auto", slack: Optional[float] = None):
    """Step 5: the local grouped SwiGLU on the received rows. [R, D]."""
    x_rows, e_loc = sent.plan.order.shape[0], experts_.wi_gate.shape[0]
    slots = None if slack is None else padded_capacity(x_rows, e_loc, slack)  # mean rows per local expert: X_/E_
    return grouped_swiglu(sent.recv_RD, sent.e_R, sent.pos_R, sent.sizes_E, experts_, impl=impl, capacity=slots)


def ep_combine(sent: EPDispatch, ys_RD_, w_Nk_, axis: str, collective=None):
    """Steps 6–7 (without the `tensor` psum): the reverse all-to-all, unsort, weighted sum. [N_, D]."""
    collective = collective or ragged_collective()
    x_rows, d = sent.plan.order.shape[0], ys_RD_.shape[-1]
    ys_XD_ = collective(ys_RD_, jnp.zeros((x_rows, d), ys_RD_.dtype), sent.recv_off_n, sent.recv_n, sent.back_off_n,
                        sent.send_n, axis_name=axis, chunk=x_rows)  # [X_, D] back in sorted order
    return combine(ys_XD_, sent.plan, w_Nk_)


def dropless_ep(x_ND_, idx_Nk_, w_Nk_, experts_: Experts, axis: str, impl: str = "auto",
                slack: Optional[float] = None, collective=None):
    """Dropless expert parallelism inside shard_map over `axis` (the numbered algorithm above). [N_, D]."""
    sent = ep_dispatch(x_ND_, idx_Nk_, experts_.wi_gate.shape[0], axis, collective)
    return ep_combine(sent, ep_experts(sent, experts_, impl, slack), w_Nk_, axis, collective)


class CapacityDispatch(NamedTuple):
    """One dispatch group's expert buffer after the capacity all-to-all (`capacity_dispatch`)."""

    plan: SortPlan  # the group's local assignments sorted by global expert, in GShard priority
    dest_X: jax.Array  # [X_] slot (expert·C + pos) of each sorted row; E·C: dropped
    x_ECD: jax.Array  # [E_, n·C, D] with an axis ([E, C, D] locally): the slots my experts compute
    slots: int  # C


def capacity_dispatch(x_ND_, idx_Nk_, n_local_experts: int, slots: int, valid_N_=None,
                      axis: Optional[str] = None) -> CapacityDispatch:
    """GShard capacity dispatch up to and including the all-to-all (`capacity_ffn`)."""
    n_tok, k = idx_Nk_.shape
    n = 1 if axis is None else jax.lax.axis_size(axis)
    e_loc = n_local_experts
    e, d = n * e_loc, x_ND_.shape[-1]
    plan = sort_by_expert(idx_Nk_, e, capacity_priority(n_tok, k, valid_N_))
    kept_X = plan.pos < slots
    dest_X = jnp.where(kept_X, plan.expert * slots + plan.pos, e * slots)
    tok_of_slot = jnp.full((e * slots,), n_tok, jnp.int32).at[dest_X].set(plan.token, mode="drop")
    x_ECD_ = jnp.take(x_ND_, tok_of_slot, axis=0, mode="fill", fill_value=0).reshape(e, slots, d)  # [E, C, D]
    if axis is not None:
        x_ECD_ = jax.lax.all_to_all(x_ECD_.reshape(n, e_loc, slots, d), axis, 0, 0, tiled=True)  # [n, E_, C, D]
        x_ECD_ = x_ECD_.transpose(1, 0, 2, 3).reshape(e_loc, n * slots, d)  # [E_, n·C, D]
    return CapacityDispatch(plan, dest_X, x_ECD_, slots)


def capacity_combine(sent: CapacityDispatch, y_ECD_, w_Nk_, axis: Optional[str] = None):
    """The capacity path's reverse all-to-all and combine: (y [N_, D], kept [N_, k] bool)."""
    n_tok, k = w_Nk_.shape
    e_loc, d = y_ECD_.shape[0], y_ECD_.shape[-1]
    n = 1 if axis is None else jax.lax.axis_size(axis)
    slots = sent.slots
    if axis is not None:
        y_ECD_ = y_ECD_.reshape(e_loc, n, slots, d).transpose(1, 0, 2, 3)  # [n, E_, C, D]
        y_ECD_ = jax.lax.all_to_all(y_ECD_, axis, 0, 0, tiled=True)  # [n, E_, C, D]: my tokens' slots again
    e = n * e_loc
    dest_a = unsort(sent.dest_X, sent.plan)  # slot of each assignment (E·C: dropped)
    y_XD_ = jnp.take(y_ECD_.reshape(e * slots, d), dest_a, axis=0, mode="fill", fill_value=0)  # [X_, D]
    return weighted_sum(y_XD_, w_Nk_), unsort(sent.plan.pos < slots, sent.plan, (n_tok, k))


def capacity_ffn(x_ND_, idx_Nk_, w_Nk_, experts_: Experts, slots: int, valid_N_=None, axis: Optional[str] = None):
    """GShard capacity dispatch (local, or all-to-all over `axis`): (y [N_, D], kept [N_, k] bool)."""
    sent = capacity_dispatch(x_ND_, idx_Nk_, experts_.wi_gate.shape[0], slots, valid_N_, axis)
    return capacity_combine(sent, swiglu_ecd(sent.x_ECD, *experts_), w_Nk_, axis)


def overlap_chunks(n_chunks: int, dispatch, compute, combine, scope: str = "moe_chunk"):
    """Software-pipelined chunks: chunk i+1's dispatch is issued before chunk i's compute, chunk i's combine before
    chunk i+1's compute. `dispatch(i)`, `compute(i, sent)`, `combine(i, sent, computed)` act on chunk i alone, so
    no chunk's collective depends on another chunk's compute and XLA's scheduler may run them concurrently (one
    unrolled program, static chunks). Each phase runs under the name scope `{scope}{i}/{phase}` (the compiled
    program's op metadata, which `composer2_jax.plan.hlo` reads). Returns [combine(i, ...) for i in chunks].
    """
    def phase(i, name, fn, *args):
        with jax.named_scope(f"{scope}{i}"), jax.named_scope(name):
            return fn(i, *args)

    sent = [None] * n_chunks
    out = [None] * n_chunks
    sent[0] = phase(0, "dispatch", dispatch)
    for i in range(n_chunks):
        if i + 1 < n_chunks:
            sent[i + 1] = phase(i + 1, "dispatch", dispatch)  # chunk i+1's all-to-all, before chunk i's experts
        computed = phase(i, "experts", compute, sent[i])
        out[i] = phase(i, "combine", combine, sent[i], computed)
    return out


# ------------------------------------------------------------------------------------------- mesh and shard_map


class MoEAxes(NamedTuple):
    """Mesh axes the MoE block uses inside shard_map (all empty/None on a single device)."""

    batch: tuple[str, ...] = ()  # axes splitting the batch (from `activation_batch`)
    length: tuple[str, ...] = ()  # axes splitting the sequence (from `activation_length`)
    expert: Optional[str] = None  # the all-to-all axis, when its size is > 1
    tensor: tuple[str, ...] = ()  # axes splitting the expert FFN width (from `moe_mlp`), when > 1

    @property
    def tokens(self) -> tuple[str, ...]:
        """Every axis that splits tokens: token statistics are summed over these."""
        return self.batch + self.length


def moe_axes(mesh, rules=shd.LOGICAL_RULES) -> MoEAxes:
    """The MoE axes of a mesh, read from the rules table (axes missing from the mesh or of size 1 are dropped)."""
    def present(name):
        return tuple(a for a in shd.mesh_axes_of(name, rules) if dict(mesh.shape).get(a, 1) > 1)

    exp = present("exp")
    if len(exp) > 1:
        raise ValueError(f"experts are sharded over several mesh axes {exp}; expert parallelism supports one")
    batch = present("activation_batch")
    if exp and exp[0] not in batch:
        raise ValueError(f"expert axis {exp[0]!r} must also split the batch (activation_batch -> {batch}); "
                         f"otherwise every expert shard would hold the same tokens")
    return MoEAxes(batch, present("activation_length"), exp[0] if exp else None, present("moe_mlp"))


class ExpertParallelism(NamedTuple):
    """How the MoE block runs on its placement: decided once, by `expert_parallelism`, and received by the layer."""

    mode: str  # 'off': one GSPMD program; 'shard_map': steps 1-6 under jax.shard_map over `mesh` (`shard_moe`);
    # 'per_shard': the code already runs per shard (the pipeline's per-shard schedule), the block's body runs as is
    axes: MoEAxes  # the mesh axes the block uses (empty when 'off')
    local_experts: int  # routed experts whose weights this program holds: E, or E / |exp| inside a per-shard program
    mesh: object = None  # the mesh the block is partitioned over (None when 'off')


def expert_parallelism(cfg, placement: shd.Placement) -> ExpertParallelism:
    """THE decision whether (and over which axes) the MoE block runs expert-parallel on `placement`.

    Off without a mesh, on a one-device mesh, or with model.moe_expert_parallel=False; otherwise the axes come from
    the placement's rules (`moe_axes`) and the block runs under its own shard_map, or directly when the placement is
    already per shard (model/pipeline.py `_run_per_shard`), where the expert weights are this device's E/|exp| only.
    """
    mesh, e = placement.mesh, cfg.n_routed_experts
    local = e // placement.axis_size("exp") if (mesh is not None and placement.per_shard) else e
    if not cfg.moe_expert_parallel or mesh is None or mesh.size == 1:
        return ExpertParallelism("off", MoEAxes(), local)
    mode = "per_shard" if placement.per_shard else "shard_map"
    return ExpertParallelism(mode, moe_axes(mesh, placement.rules), local, mesh)


def check_moe_divisible(axes: MoEAxes, mesh, b: int, t: int, e: int, f: int):
    """Errors naming both numbers when the mesh does not divide the MoE block's dimensions."""
    for what, size, names in (("batch", b, axes.batch), ("sequence length", t, axes.length),
                              ("model.n_routed_experts", e, (axes.expert,) if axes.expert else ()),
                              ("model.moe_intermediate_size", f, axes.tensor)):
        n = shd.axis_size(mesh, names)
        if size % n:
            raise ValueError(f"MoE: {what}={size} is not divisible by mesh axes {names} of size {n}")


def _spec(*dims) -> P:
    return P(*[(d if len(d) > 1 else d[0]) if d else None for d in dims])


def shard_moe(body, mesh, axes: MoEAxes, with_replay: bool):
    """`body(x_BTD, valid_BT, [replay_BTk], router_DE, bias_E, wi_gate, wi_up, wo)` under jax.shard_map on `mesh`.

    Tokens are split like the residual stream (batch × length axes), experts over `expert`, the expert FFN width
    over `tensor`; the router is replicated. Outputs: y and routing split like tokens, statistics replicated,
    per-sequence balance losses split over the batch axes.
    """
    tok = _spec(axes.batch, axes.length, ())
    tok2 = _spec(axes.batch, axes.length)
    ex = (axes.expert,) if axes.expert else ()
    w_in = _spec(ex, (), axes.tensor)
    w_out = _spec(ex, axes.tensor, ())
    in_specs = (tok, tok2) + ((tok,) if with_replay else ()) + (P(), P(), w_in, w_in, w_out)
    out_specs = (tok, tok, P(), _spec(axes.batch))
    # Under a pipeline the block runs inside `jax.vmap(spmd_axis_name='stage')` (model/pipeline.py), where JAX 0.10's
    # varying-axes inference wrongly counts `stage` among the axes the outputs vary over; the specs themselves are
    # checked by the pipelined ≡ unpipelined tests (tests/test_pipeline_parallel.py), so the check is off there.
    check_vma = dict(mesh.shape).get("stage", 1) == 1
    return jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=check_vma)
