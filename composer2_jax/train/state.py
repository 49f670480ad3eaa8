"""Train state and its sharded initialisation: eval_shape → partition specs → jit(init, out_shardings).

Nothing full-size is ever materialised on one host: the abstract state gives every leaf's shape and logical
axes, the rules table turns those into NamedShardings, and the jitted init writes each shard where it lives.
"""

from __future__ import annotations

from typing import Any, Callable

import flax
import jax
import jax.numpy as jnp
import optax
from flax import linen as nn
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from composer2_jax import sharding as shd
from composer2_jax.sharding import activate


@flax.struct.dataclass
class TrainState:
    """Everything a step reads and writes; `router_state` holds the aux-loss-free routing biases (no gradient)."""

    step: jax.Array
    params: Any
    opt_state: Any
    router_state: Any


def logical_axes(boxed_tree):
    """Tree of logical-name tuples for a tree of `nn.LogicallyPartitioned` leaves."""
    specs = nn.get_partition_spec(boxed_tree)
    return jax.tree.map(lambda s: tuple(s), specs, is_leaf=lambda x: isinstance(x, P))


def path_keys(path) -> tuple:
    return tuple(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k))) for k in path)


def opt_state_shardings(abstract_opt_state, abstract_params, param_shardings, mesh: Mesh):
    """Shard each optimizer leaf like the parameter it mirrors (matched by path suffix and shape); replicate the
    rest."""
    by_path = {}
    for (path, leaf), sh in zip(jax.tree_util.tree_flatten_with_path(abstract_params)[0],
                                jax.tree.leaves(param_shardings)):
        by_path[path_keys(path)] = (leaf.shape, sh)

    def one(path, leaf):
        keys = path_keys(path)
        for i in range(len(keys)):
            hit = by_path.get(keys[i:])
            if hit is not None and hit[0] == leaf.shape:
                return hit[1]
        return NamedSharding(mesh, P())

    return jax.tree_util.tree_map_with_path(one, abstract_opt_state)


def init_train_state(model: nn.Module, make_tx: Callable[[Any, Any], optax.GradientTransformation], mesh: Mesh,
                     rng: jax.Array, example_tokens_shape: tuple[int, int]):
    """(state, state_shardings, tx): a TrainState initialised directly into its shardings on `mesh`.

    `make_tx(abstract_params, logical_axes)` builds the optimizer (it may need the tree structure and axis names).
    """
    _, shardings, tx = abstract_train_state(model, make_tx, mesh, example_tokens_shape)
    tokens = jnp.zeros(example_tokens_shape, jnp.int32)

    def init(r):
        variables = nn.unbox(model.init(r, tokens))
        return TrainState(step=jnp.zeros((), jnp.int32), params=variables["params"],
                          opt_state=tx.init(variables["params"]), router_state=variables.get("router_state", {}))

    with activate(mesh):
        state = jax.jit(init, out_shardings=shardings)(rng)
    return state, shardings, tx


def train_state_from(params, router_state, tx: optax.GradientTransformation, shardings: TrainState,
                     mesh: Mesh) -> TrainState:
    """A TrainState at step 0 holding given (already sharded) params and router state with a fresh optimizer state:
    a stage that starts from another's weights compiles only `tx.init`, not the model's init program."""
    with activate(mesh):
        opt_state = jax.jit(tx.init, out_shardings=shardings.opt_state)(params)
    return TrainState(step=jax.device_put(jnp.zeros((), jnp.int32), shardings.step), params=params,
                      opt_state=opt_state, router_state=router_state)


def abstract_train_state(model: nn.Module, make_tx, mesh: Mesh, example_tokens_shape: tuple[int, int]):
    """(abstract state, shardings, tx) without allocating anything: for planning and for restoring checkpoints."""
    tokens = jnp.zeros(example_tokens_shape, jnp.int32)
    rng = jax.random.key(0)
    abstract_vars = jax.eval_shape(lambda r: model.init(r, tokens), rng)
    logical = logical_axes(abstract_vars)
    var_shardings = shd.logical_shardings(abstract_vars, mesh)
    unboxed = nn.unbox(abstract_vars)
    tx = make_tx(unboxed["params"], logical["params"])
    abstract_opt = jax.eval_shape(tx.init, unboxed["params"])
    shardings = TrainState(step=NamedSharding(mesh, P()), params=var_shardings["params"],
                           opt_state=opt_state_shardings(abstract_opt, unboxed["params"],
                                                         var_shardings["params"], mesh),
                           router_state=var_shardings.get("router_state", {}))
    abstract = TrainState(step=jax.ShapeDtypeStruct((), jnp.int32), params=unboxed["params"], opt_state=abstract_opt,
                          router_state=unboxed.get("router_state", {}))
    abstract = jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), abstract, shardings)
    return abstract, shardings, tx
