"""The decoder: embedding → unrolled prefix (the dense layers) → scanned stack of identical units → norm → LM head.

Layer i is MoE when `cfg.is_moe_layer(i)`. Layers [0, first_k_dense_replace) form the unrolled prefix
(`layers_{i}`); the rest is cut into units of `moe_layer_freq` consecutive layers with the same dense/MoE pattern,
run under `nn.scan` as `stack` (params gain a leading `layers` axis) or unrolled as `stack_{u}`; layers that do not
fill a last unit form an unrolled suffix (`layers_{i}`). `stack_params`/`unstack_params` convert the two layouts.

Placement: the caller gives the mesh (`Transformer(cfg, mesh)`); every module gets `Transformer.placement` (that mesh
and the rules table) as its `placement` field (constraints, attention kernels, MoE dispatch), and the pipelined stack
gives its units the stage's placement (`Placement.stage`: rules without `stage`, per shard under the per-shard
schedule). Nothing reads an ambient mesh or ambient rules, so a call behaves the same whatever `with` block wraps it.

Pipeline parallelism: when the mesh given to the model has a `stage` axis of size S > 1, the scanned stack runs
under the circular schedule of model/pipeline.py (params unchanged: the `layers` axis is sharded over `stage`);
the embedding, the unrolled prefix and suffix, the final norm, the head and MTP run outside it. Recorded-routing
replay and the per-layer routing output are not available then (`routing` is None).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
from flax import linen as nn
from jax.sharding import PartitionSpec as P

from composer2_jax import sharding as shd
from composer2_jax.model.block import RESIDUAL, DecoderLayer, remat
from composer2_jax.model.layer_plan import (
    SCANNED_STACK,
    layer_name,
    layer_plan,
    moe_layer_ids,
    unit_layer_name,
    unit_name,
)
from composer2_jax.model.layers import RMSNorm, dtype_of, embed_tokens, param
from composer2_jax.model.mtp import MTP, MTPOutput
from composer2_jax.model.pipeline import PipelineLayout, StackInputs, pipeline_spec, run_pipeline, runs_per_shard
from composer2_jax.model_config import ModelConfig


class ModelOutput(NamedTuple):
    """What the decoder returns."""

    logits: Optional[jax.Array]  # [B, T, V] fp32 (None when compute_logits=False)
    hidden: jax.Array  # [B, T, D] last layer's residual stream, before the final norm (the MTP input)
    normed: jax.Array  # [B, T, D] after the final norm (the LM-head input, for chunked losses)
    routing: Optional[jax.Array]  # [L_moe, B, T, k] int32 expert ids of every MoE layer in order, or None
    moe_load: Optional[jax.Array]  # [L_moe, E] tokens per expert per MoE layer
    balance_loss: jax.Array  # scalar: mean over MoE layers of the sequence-wise balance loss (0 when dense)
    moe_dropped: Optional[jax.Array] = None  # [L_moe] fraction of (token, expert) pairs dropped (capacity mode)
    router_entropy: Optional[jax.Array] = None  # [L_moe] mean entropy of the normalised router scores (nats)
    mtp: Optional[MTPOutput] = None  # MTP depths' outputs (model/mtp.py) when called with mtp_tokens, else None


class Unit(nn.Module):
    """`moe_layer_freq` consecutive layers with a fixed dense/MoE pattern: the body of the scan."""

    cfg: ModelConfig
    pattern: tuple[bool, ...]
    placement: Optional[shd.Placement | jax.sharding.Mesh] = None  # where its layers run (model/block.py)

    @nn.compact
    def __call__(self, x_BTD, positions_BT, segment_ids_BT, replay_PBTk):
        layer = remat(DecoderLayer, self.cfg.remat_policy)
        auxes, j_moe = [], 0
        for j, is_moe in enumerate(self.pattern):
            replay = None if (replay_PBTk is None or not is_moe) else replay_PBTk[j_moe]
            block = layer(self.cfg, is_moe, self.placement, name=unit_layer_name(j))
            x_BTD, aux = block(x_BTD, positions_BT, segment_ids_BT, replay)
            if is_moe:
                auxes.append(aux)
                j_moe += 1
        stacked = jax.tree.map(lambda *a: jnp.stack(a), *auxes) if auxes else None
        return x_BTD, stacked


class Transformer(nn.Module):
    """Decoder-only LM. Call with tokens [B, T] (+ positions, segment ids, recorded routing).

    With `cfg.num_mtp_layers` > 0 the MTP modules (model/mtp.py, params under `mtp`) are created at init and run
    when `mtp_tokens` [B, T, M] (t_{i+k} per depth, from `mtp.mtp_batch`) is passed; `mtp_detach` stops their
    gradient into the trunk and the shared embedding.
    """

    cfg: ModelConfig
    # The mesh the model runs on, given by the caller: activation constraints, context-parallel attention and the
    # MoE dispatch (model/moe.py) use it (with the rules table: `placement`), and the MTP shift reads its `context`
    # size. None: one GSPMD program without constraints, whatever mesh is active around it.
    mesh: Optional[jax.sharding.Mesh] = None

    @property
    def placement(self) -> shd.Placement:
        """Where the model runs: the one Placement every module below receives."""
        return shd.Placement.of(self.mesh)

    def _layer(self, i: int):
        return remat(DecoderLayer, self.cfg.remat_policy)(self.cfg, self.cfg.is_moe_layer(i), self.placement,
                                                          name=layer_name(i))

    @nn.compact
    def __call__(self, tokens_BT, positions_BT=None, segment_ids_BT=None, routing=None, *, compute_logits=True,
                 mtp_tokens=None, mtp_detach: bool = False):
        c = self.cfg
        b, t = tokens_BT.shape
        if positions_BT is None:
            positions_BT = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
        embed_VD = param(self, "embedding", (c.vocab_size, c.hidden_size), ("vocab", "embed"),
                         nn.initializers.normal(c.initializer_range), dtype_of(c.param_dtype))
        x_BTD = embed_tokens(embed_VD, tokens_BT, dtype_of(c.dtype), self.placement)
        prefix, pattern, n_units, suffix = layer_plan(c)
        replay = _split_replay(routing, c, prefix, pattern, n_units)
        auxes = []
        for i in prefix:
            x_BTD, aux = self._layer(i)(x_BTD, positions_BT, segment_ids_BT, replay["prefix"].get(i))
            auxes.append(_expand(aux))
        if n_units:
            x_BTD, aux = self._stack(x_BTD, positions_BT, segment_ids_BT, replay["stack"], pattern, n_units)
            auxes.append(aux)
        for i in suffix:
            x_BTD, aux = self._layer(i)(x_BTD, positions_BT, segment_ids_BT, replay["suffix"].get(i))
            auxes.append(_expand(aux))
        normed_BTD = RMSNorm(c.rms_norm_eps, c.dtype, c.param_dtype, name="final_norm")(x_BTD)
        logits = self.head(normed_BTD) if compute_logits else None
        out = _output(logits, x_BTD, normed_BTD, [a for a in auxes if a is not None])
        if c.num_mtp_layers and (mtp_tokens is not None or self.is_initializing()):
            if mtp_tokens is None:  # init: any ids of the right shape create the MTP params
                mtp_tokens = jnp.broadcast_to(tokens_BT[..., None], (b, t, c.num_mtp_layers))
            mtp = MTP(c, self.placement, name="mtp")
            out = out._replace(mtp=mtp(x_BTD, mtp_tokens, embed_VD, positions_BT, segment_ids_BT, mtp_detach))
        return out

    def _stack(self, x_BTD, positions_BT, segment_ids_BT, replay_UPBTk, pattern, n_units):
        """Run the units, under nn.scan or unrolled; aux leaves come back as [U·P_moe, ...]."""
        c = self.cfg
        spec = None if self.is_initializing() else pipeline_spec(c, self.placement.mesh, n_units)
        if spec is not None:
            return self._pipelined_stack(x_BTD, positions_BT, segment_ids_BT, replay_UPBTk, pattern, spec)
        if c.scan_layers:
            x_BTD, aux = scanned_units(n_units)(c, pattern, self.placement, name=SCANNED_STACK)(
                x_BTD, positions_BT, segment_ids_BT, replay_UPBTk)
        else:
            auxes = []
            for u in range(n_units):
                r = None if replay_UPBTk is None else replay_UPBTk[u]
                x_BTD, a = Unit(c, pattern, self.placement, name=unit_name(u))(x_BTD, positions_BT, segment_ids_BT,
                                                                               r)
                auxes.append(a)
            aux = jax.tree.map(lambda *a: jnp.stack(a), *auxes) if auxes[0] is not None else None
        if aux is None:
            return x_BTD, None
        return x_BTD, jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), aux)

    def _pipelined_stack(self, x_BTD, positions_BT, segment_ids_BT, replay_UPBTk, pattern, spec):
        """The scanned stack under the pipeline schedule; aux leaves [U·P_moe, ...] without routing indices."""
        c, mesh = self.cfg, self.placement.mesh
        if replay_UPBTk is not None:
            raise ValueError(f"routing replay is not supported under pipeline parallelism (mesh stage={spec.stages})")
        # The stage program's placement, decided here: inside a stage the rules drop `stage` (the vmap's axis), so
        # the residual stream, the MoE shard_map's token split and every constraint of the units agree on one
        # layout, batch over data×fsdp×expert; under the per-shard schedule the units trace per shard.
        per_shard = runs_per_shard(c, dict(mesh.shape))
        at = self.placement.stage(per_shard)
        inner = at.rules
        unit = Unit(c, pattern, at)

        def stage_fn(params_L, router_L, x_bTD, positions_bT, segment_ids_bT):
            # A plain lax.scan over `Unit.apply`, not nn.scan: flax's scan partially evaluates its body to find
            # loop invariants, and JAX 0.10 cannot partially evaluate the MoE shard_map under the stage vmap.
            def one(x, variables):
                y, aux = unit.apply(variables, x, positions_bT, segment_ids_bT, None)
                return at.constrain(y, RESIDUAL), None if aux is None else {k: v for k, v in aux.items()
                                                                            if k != "indices"}

            return jax.lax.scan(one, at.constrain(x_bTD, RESIDUAL), {"params": params_L, "router_state": router_L})

        router = self.variables.get("router_state", {}).get(SCANNED_STACK, {})
        params_U = self.variables["params"][SCANNED_STACK]
        gather_specs = local_specs = None
        if c.pipeline_gather_params:  # one unit's parameter specs without the FSDP axes (model/pipeline.py)
            mb = x_BTD.shape[0] // spec.microbatches
            shapes = Unit(c, pattern, self.placement.stage())  # as the stage body sees a microbatch (not per shard)
            boxed = jax.eval_shape(lambda: shapes.init(jax.random.key(0), x_BTD[:mb], positions_BT[:mb],
                                                       None if segment_ids_BT is None else segment_ids_BT[:mb], None))
            logical = nn.get_partition_spec(boxed["params"])
            if per_shard:  # per-shard schedule: gradients reduced once
                local_specs = jax.tree.map(lambda names: (nn.logical_to_mesh_axes(tuple(names), inner),
                                                          shd.per_shard_param_spec(tuple(names), inner)),
                                           logical, is_leaf=lambda x: isinstance(x, P))
            else:  # GSPMD gathers before the loop; the gradient reductions stay inside it (model/pipeline.py)
                gather_specs = nn.logical_to_mesh(logical, shd.gathered_param_rules(inner))
        layout = PipelineLayout(batch_axes=shd.mesh_axes_of("activation_batch", inner),
                                remat_stage=c.remat_policy != "none", gather_specs=gather_specs,
                                local_specs=local_specs)
        y_BTD, aux = run_pipeline(stage_fn, params_U, router, StackInputs(x_BTD, positions_BT, segment_ids_BT),
                                  spec, mesh, layout)
        y_BTD = self.placement.constrain(y_BTD, RESIDUAL)  # back to the batch split over stage×data×fsdp×expert
        if aux is None:
            return y_BTD, None
        aux = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), aux)  # [U, P_moe, ...] → [U·P_moe, ...]
        m = spec.microbatches  # sums over microbatches → the batch's load; means for the per-batch averages
        return y_BTD, dict(load=aux["load"], balance_loss=aux["balance_loss"] / m, dropped=aux["dropped"] / m,
                           entropy=aux["entropy"] / m)

    def head(self, normed_BTD):
        """LM head: fp32 logits [B, T, V] (untied from the embedding)."""
        c = self.cfg
        w_DV = param(self, "lm_head", (c.hidden_size, c.vocab_size), ("embed", "vocab"),
                     nn.initializers.normal(c.initializer_range), dtype_of(c.param_dtype))
        logits = head_logits(normed_BTD, w_DV, c)
        return self.placement.constrain(logits, ("activation_batch", "activation_length", "activation_vocab"))


def head_logits(normed_XD, w_DV, cfg: ModelConfig):
    """fp32 logits [..., V] of the LM head w [D, V] (the trunk's `lm_head` or an MTP depth's copy) in the compute
    dtype: `Transformer.head`, and the decoders' at the positions they sample."""
    dt = dtype_of(cfg.dtype)
    return jnp.einsum("...D,DV->...V", normed_XD.astype(dt), w_DV.astype(dt), preferred_element_type=jnp.float32)


def scanned_units(n_units: int):
    """`Unit` under nn.scan over `n_units` units (params and router state gain a leading `layers` axis)."""
    return nn.scan(Unit, variable_axes={"params": 0, "router_state": 0, "intermediates": 0},
                   split_rngs={"params": True}, in_axes=(nn.broadcast, nn.broadcast, 0), length=n_units,
                   metadata_params={nn.PARTITION_NAME: "layers"})


def _expand(aux):
    """A single layer's aux gets a leading layer axis of 1."""
    return None if aux is None else jax.tree.map(lambda a: a[None], aux)


def _output(logits, hidden, normed, auxes: list[dict[str, Any]]) -> ModelOutput:
    if not auxes:
        return ModelOutput(logits, hidden, normed, None, None, jnp.zeros((), jnp.float32))
    if any("indices" not in a for a in auxes):  # a pipelined stack returns no routing
        auxes = [{k: v for k, v in a.items() if k != "indices"} for a in auxes]
    aux = jax.tree.map(lambda *a: jnp.concatenate(a), *auxes)
    return ModelOutput(logits, hidden, normed, aux.get("indices"), aux["load"], jnp.mean(aux["balance_loss"]),
                       aux["dropped"], aux["entropy"])


def _split_replay(routing, cfg: ModelConfig, prefix, pattern, n_units):
    """Recorded routing [L_moe, B, T, k] split into prefix / scanned [U, P_moe, ...] / suffix parts."""
    out = {"prefix": {}, "stack": None, "suffix": {}}
    if routing is None:
        return out
    ids = moe_layer_ids(cfg)
    if routing.shape[0] != len(ids):
        raise ValueError(f"routing replay has {routing.shape[0]} layers; the model has {len(ids)} MoE layers")
    pos = {layer: j for j, layer in enumerate(ids)}
    for i in prefix:
        if i in pos:
            out["prefix"][i] = routing[pos[i]]
    p_moe = sum(pattern)
    start = len(prefix)
    if n_units and p_moe:
        first = pos[next(i for i in ids if i >= start)]
        out["stack"] = routing[first:first + n_units * p_moe].reshape((n_units, p_moe) + routing.shape[1:])
    for i in range(start + n_units * len(pattern), cfg.num_layers):
        if i in pos:
            out["suffix"][i] = routing[pos[i]]
    return out


def stack_params(params: dict, n_units: int) -> dict:
    """Unrolled `stack_{u}` subtrees → one scanned `stack` subtree with a leading layer axis."""
    params = dict(params)
    units = [params.pop(unit_name(u)) for u in range(n_units)]
    params[SCANNED_STACK] = jax.tree.map(lambda *a: jnp.stack(a), *units)
    return params


def unstack_params(params: dict, n_units: int) -> dict:
    """The inverse of `stack_params`."""
    params = dict(params)
    stacked = params.pop(SCANNED_STACK)
    for u in range(n_units):
        params[unit_name(u)] = jax.tree.map(lambda a: a[u], stacked)
    return params
