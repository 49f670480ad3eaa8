"""Which decoder layers exist and where their parameters live: the one description every walker of the trunk uses
(the model, decoding, router-bias updates, checkpoint conversion, the planner).

The first `first_k_dense_replace` layers are a dense prefix (`layers_{i}`); the rest is cut into units of
`moe_layer_freq` consecutive layers with one dense/MoE pattern — scanned (`stack/layer_{j}`, every leaf with a
leading [U] axis) or unrolled (`stack_{u}/layer_{j}`); layers that do not fill a last unit form a suffix
(`layers_{i}`).
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax

from composer2_jax.model_config import ModelConfig

SCANNED_STACK = "stack"  # the scanned units (every leaf [U, ...])


def layer_name(i: int) -> str:
    """Name of an unrolled prefix/suffix layer (model layer i)."""
    return f"layers_{i}"


def unit_name(u: int) -> str:
    """Name of unrolled unit u (scan_layers=False)."""
    return f"stack_{u}"


def unit_layer_name(j: int) -> str:
    """Name of the j-th layer inside a unit."""
    return f"layer_{j}"


def layer_plan(cfg: ModelConfig) -> tuple[list[int], tuple[bool, ...], int, list[int]]:
    """(prefix layer ids, unit pattern, number of units, suffix layer ids)."""
    k, n, p = cfg.first_k_dense_replace, cfg.num_layers, cfg.moe_layer_freq
    prefix = list(range(k))
    n_units = (n - k) // p
    pattern = tuple(cfg.is_moe_layer(k + j) for j in range(p)) if n_units else ()
    suffix = list(range(k + n_units * p, n))
    return prefix, pattern, n_units, suffix


def moe_layer_ids(cfg: ModelConfig) -> list[int]:
    """Absolute ids of the MoE layers, in the order `ModelOutput.routing` lists them."""
    return [i for i in range(cfg.num_layers) if cfg.is_moe_layer(i)]


class LayerSlot(NamedTuple):
    """Where one decoder layer lives in the `params` / `router_state` trees."""

    index: int  # layer index in model order
    moe: bool  # routed experts (else the dense MLP)
    path: tuple[str, ...]  # keys from the tree's root to the layer's subtree
    unit: Optional[int]  # row of the leading [U] axis when the path runs through the scanned `stack`, else None


def layer_slots(cfg: ModelConfig, scanned: bool) -> list[LayerSlot]:
    """Every trunk layer in model order, for the scanned layout (`stack/layer_{j}` with a leading unit axis) or the
    unrolled one (`stack_{u}/layer_{j}`): the one place that knows the names `Transformer` gives its layers."""
    prefix, pattern, n_units, suffix = layer_plan(cfg)
    slots = [LayerSlot(i, cfg.is_moe_layer(i), (layer_name(i),), None) for i in prefix]
    for u in range(n_units):
        for j, moe in enumerate(pattern):
            path = (SCANNED_STACK if scanned else unit_name(u), unit_layer_name(j))
            slots.append(LayerSlot(len(prefix) + u * len(pattern) + j, moe, path, u if scanned else None))
    slots += [LayerSlot(i, cfg.is_moe_layer(i), (layer_name(i),), None) for i in suffix]
    return slots


def layer_subtree(tree, slot: LayerSlot, default=None):
    """The subtree of `tree` (params or router_state) at `slot`, its unit row taken for the scanned stack; `default`
    when the tree has no such path (a dense layer's router_state)."""
    node = tree
    for key in slot.path:
        if key not in node:
            return default
        node = node[key]
    return node if slot.unit is None else jax.tree.map(lambda a: a[slot.unit], node)
