"""The real train step compiled for abstract inputs on a simulated mesh, and what the compiled programs cost
(XLA's cost analysis, memory analysis and collectives)."""

from __future__ import annotations

import contextlib
import dataclasses
import math

import jax
import optax

from composer2_jax.model import Transformer, planning
from composer2_jax.model.layer_plan import layer_plan
from composer2_jax.plan.hlo import _by_kind, collectives
from composer2_jax.sharding import MESH_AXES, activate
from composer2_jax.train import optim
from composer2_jax.train.state import abstract_train_state
from composer2_jax.train.step import StepConfig, batch_shardings, make_train_step


def parse_mesh(text: str) -> dict[str, int]:
    """`data=1,fsdp=8,...` → dict; every axis name must be a mesh axis."""
    out = {}
    for part in filter(None, text.split(",")):
        if "=" not in part:
            raise ValueError(f"mesh entry {part!r} is not axis=size; expected e.g. data=1,fsdp=8,expert=4")
        k, v = part.split("=", 1)
        if k not in MESH_AXES:
            raise ValueError(f"unknown mesh axis {k!r}; expected names from {MESH_AXES}")
        out[k] = int(v)
    return {a: out.get(a, 1) for a in MESH_AXES}


def compile_train_step(cfg, mesh, batch: int, seq: int, optimizer: str, count_loops: bool = False,
                       grad_accum: int = 1):
    """Lower and compile the real train step for abstract inputs on `mesh` (accelerator-like kernels; with
    `count_loops`, the loops XLA's cost analysis counts once are unrolled: model/planning.py). `batch` is one
    micro-batch; with `grad_accum` > 1 the step takes grad_accum × batch sequences and accumulates the gradients
    over grad_accum micro-batches (train/step.py), as a stage with `step.grad_accum` does."""
    model = Transformer(cfg, mesh)
    oc = optim.OptimConfig(name=optimizer)
    abstract, shardings, tx = abstract_train_state(model, lambda p, n: optim.make_optimizer(oc, p, n, mesh), mesh,
                                                   (batch, seq))
    bs = batch_shardings(mesh)
    batch_abs = {k: jax.ShapeDtypeStruct((batch * grad_accum, seq), jax.numpy.int32, sharding=s)
                 for k, s in bs.items()}
    with activate(mesh), planning.accelerator_kernels(), \
            (planning.counting_loops() if count_loops else contextlib.nullcontext()):
        step = jax.jit(make_train_step(model, tx, StepConfig(grad_accum=grad_accum)), donate_argnums=0,
                       in_shardings=(shardings, bs), out_shardings=(shardings, None))
        compiled = step.lower(abstract, batch_abs).compile()
    return compiled, abstract


def compile_optimizer_update(cfg, optim_cfg, mesh, shape: tuple[int, int]):
    """The optimizer update alone (gradients → new parameters and optimizer state, both donated) for the model's
    real train state on `mesh`, compiled: what the planner costs and the dry run's extrapolation measures."""
    model = Transformer(cfg, mesh)
    abstract, shardings, tx = abstract_train_state(
        model, lambda p, n: optim.make_optimizer(optim_cfg, p, n, mesh), mesh, shape)

    def update(params, opt_state, grads):
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    with activate(mesh):
        return jax.jit(update, donate_argnums=(0, 1),
                       in_shardings=(shardings.params, shardings.opt_state, shardings.params),
                       out_shardings=(shardings.params, shardings.opt_state)) \
            .lower(abstract.params, abstract.opt_state, abstract.params).compile()


def _optimizer_cost(cfg, mesh, batch: int, seq: int, optimizer: str, node_size: int) -> dict:
    """Per-device cost of the optimizer update alone (gradients → new params and state) for the model's real
    (scanned) train state on `mesh`: FLOPs, HBM bytes and collective bytes inside / across nodes. The update has
    no loop XLA's cost analysis would count once (Muon's Newton–Schulz steps are unrolled in Python), so the
    whole step's optimizer work is counted without an unrolled model."""
    compiled = compile_optimizer_update(cfg, optim.OptimConfig(name=optimizer), mesh, (batch, seq))
    cost = _cost(compiled)
    colls = collectives(compiled.as_text(), node_size)
    cost["ici"] = sum(c.wire_bytes for c in colls if not c.crosses_nodes)
    cost["dcn"] = sum(c.wire_bytes for c in colls if c.crosses_nodes)
    return cost


def _shard_bytes(tree) -> int:
    """Bytes of one device's shards of an abstract tree (max over devices)."""
    total = 0
    for leaf in jax.tree.leaves(tree):
        shard = leaf.sharding.shard_shape(leaf.shape)
        total += math.prod(shard) * leaf.dtype.itemsize
    return total


def _cost(compiled) -> dict:
    """FLOPs and HBM bytes per device from a compiled program's cost analysis."""
    ca = compiled.cost_analysis()
    ca = ca[0] if isinstance(ca, (list, tuple)) else ca
    return {"flops": float(ca.get("flops", 0.0)), "bytes": float(ca.get("bytes accessed", 0.0))}


def _unit_costs(cfg, mesh, batch, seq, optimizer, node_size):
    """(cost with one unit, per-unit increment) from two unrolled compiles, collectives included."""
    prefix, pattern, n_units, suffix = layer_plan(cfg)
    p = len(pattern) or 1
    out = []
    for u in (1, 2):
        small = dataclasses.replace(cfg, num_layers=len(prefix) + u * p, scan_layers=False)
        compiled, _ = compile_train_step(small, mesh, batch, seq, optimizer, count_loops=True)
        cost = _cost(compiled)
        colls = collectives(compiled.as_text(), node_size)
        cost["ici"] = sum(c.wire_bytes for c in colls if not c.crosses_nodes)
        cost["dcn"] = sum(c.wire_bytes for c in colls if c.crosses_nodes)
        cost["kinds"] = _by_kind(colls)
        cost["colls"] = colls
        out.append(cost)
    delta = {k: out[1][k] - out[0][k] for k in ("flops", "bytes", "ici", "dcn")}
    return out[0], delta, n_units, out


def peak_bytes(mem) -> int:
    """Peak device bytes of a compiled program's memory analysis: arguments + outputs − aliased + temporaries."""
    return mem.argument_size_in_bytes + mem.output_size_in_bytes - mem.alias_size_in_bytes + mem.temp_size_in_bytes

