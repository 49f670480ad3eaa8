"""Mesh construction and the one logical-axis rules table.

Mesh axes, outermost first: `data` (pure data parallel, may span DCN slices), `fsdp` (data parallel with
parameters sharded), `expert` (expert parallelism; also splits the batch outside MoE layers), `tensor`
(heads / FFN width), `context` (sequence, for ring attention). Any axis may be 1.

Axis types: we build meshes with `AxisType.Auto` on purpose. The code annotates parameters with logical names
(`nn.with_logical_partitioning`) and activations with `with_logical_constraint`, and lets GSPMD propagate the rest;
collectives that must be explicit (MoE all-to-all, ring ppermute) live in small `shard_map` functions. JAX >= 0.10
defaults `jax.make_mesh` to Explicit axes, under which every reshape of a sharded array would need an
`out_sharding`; that is the opposite style, so every mesh here is made through `make_mesh` below.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping, Optional, Sequence

import jax
import numpy as np
from flax import linen as nn
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

MESH_AXES = ("data", "fsdp", "expert", "tensor", "context")

# The one rules table: logical axis name -> mesh axes (None = replicated). Parameters and activations both.
LOGICAL_RULES: tuple[tuple[str, Optional[str | tuple[str, ...]]], ...] = (
    # activations
    ("activation_batch", ("data", "fsdp", "expert")),
    ("activation_length", "context"),
    ("activation_embed", None),
    ("activation_heads", "tensor"),
    ("activation_kv", None),
    ("activation_mlp", "tensor"),
    ("activation_vocab", "tensor"),
    ("activation_exp", "expert"),
    # parameters
    ("vocab", "tensor"),
    ("embed", "fsdp"),
    ("heads", "tensor"),
    ("q_lora", None),
    ("kv_lora", None),
    ("kv", None),
    ("mlp", "tensor"),
    ("exp", "expert"),
    ("moe_mlp", "tensor"),
    ("layers", None),
    ("norm", None),
)


@dataclasses.dataclass(frozen=True)
class MeshConfig:
    """Sizes of the five mesh axes; their product must equal the device count."""

    data: int = 1
    fsdp: int = -1  # -1: whatever is left of the devices
    expert: int = 1
    tensor: int = 1
    context: int = 1

    def shape(self, n_devices: int) -> tuple[int, ...]:
        """Resolve the one -1 axis (if any) and check the product against the device count."""
        sizes = [getattr(self, a) for a in MESH_AXES]
        free = [i for i, s in enumerate(sizes) if s == -1]
        if len(free) > 1:
            raise ValueError(f"at most one mesh axis may be -1, got {dict(zip(MESH_AXES, sizes))}")
        for a, s in zip(MESH_AXES, sizes):
            if s == 0 or s < -1:
                raise ValueError(f"mesh axis {a}={s}; expected a positive size or -1")
        fixed = math.prod(s for s in sizes if s != -1)
        if free:
            if n_devices % fixed:
                raise ValueError(f"{n_devices} devices cannot be split into mesh {dict(zip(MESH_AXES, sizes))}: "
                                 f"the fixed axes multiply to {fixed}, which does not divide {n_devices}")
            sizes[free[0]] = n_devices // fixed
        if math.prod(sizes) != n_devices:
            raise ValueError(f"mesh {dict(zip(MESH_AXES, sizes))} has {math.prod(sizes)} devices, "
                             f"but {n_devices} are available")
        return tuple(sizes)


def make_mesh(cfg: MeshConfig | Mapping[str, int] | None = None, devices: Optional[Sequence] = None) -> Mesh:
    """A 5-axis Auto-typed mesh over `devices` (default: all)."""
    if cfg is None:
        cfg = MeshConfig()
    elif not isinstance(cfg, MeshConfig):
        unknown = sorted(set(cfg) - set(MESH_AXES))
        if unknown:
            raise ValueError(f"unknown mesh axes {unknown}; expected names from {MESH_AXES}")
        cfg = MeshConfig(**{a: cfg.get(a, 1) for a in MESH_AXES})  # axes not named are 1
    devices = list(devices) if devices is not None else jax.devices()
    shape = cfg.shape(len(devices))
    auto = (jax.sharding.AxisType.Auto,) * len(MESH_AXES)
    if devices == jax.devices():
        return jax.make_mesh(shape, MESH_AXES, axis_types=auto)
    return Mesh(np.asarray(devices).reshape(shape), MESH_AXES, axis_types=auto)


def logical_to_spec(logical: Sequence[Optional[str]], rules=LOGICAL_RULES) -> P:
    """PartitionSpec of one array from its logical axis names."""
    return nn.logical_to_mesh_axes(tuple(logical), rules)


def _axis_size(mesh: Mesh, axes) -> int:
    if axes is None:
        return 1
    axes = (axes,) if isinstance(axes, str) else axes
    return math.prod(mesh.shape[a] for a in axes)


def check_divisible(name: str, shape: Sequence[int], spec: P, mesh: Mesh):
    """Raise if a mesh axis does not divide the array dimension it shards (never silently replicate)."""
    for dim, (size, axes) in enumerate(zip(shape, tuple(spec) + (None,) * (len(shape) - len(spec)))):
        n = _axis_size(mesh, axes)
        if size % n:
            raise ValueError(f"{name}: dimension {dim} of size {size} is sharded over mesh axes {axes} of total size "
                             f"{n}, which does not divide it")


def logical_shardings(abstract_tree, mesh: Mesh, rules=LOGICAL_RULES):
    """NamedShardings for a tree of `nn.LogicallyPartitioned` (or plain) abstract leaves, with divisibility checks."""
    specs = nn.get_partition_spec(abstract_tree)
    mesh_specs = nn.logical_to_mesh(specs, rules)
    values = nn.meta.unbox(abstract_tree)

    def one(path, leaf, spec):
        spec = spec if isinstance(spec, P) else P()
        check_divisible(jax.tree_util.keystr(path), leaf.shape, spec, mesh)
        return NamedSharding(mesh, spec)

    return jax.tree_util.tree_map_with_path(one, values, mesh_specs, is_leaf=lambda x: isinstance(x, P))
