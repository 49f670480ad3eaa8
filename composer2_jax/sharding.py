"""Mesh construction and the one logical-axis rules table.

Mesh axes, outermost first: `stage` (pipeline parallelism: the scanned decoder stack's layers, model/pipeline.py;
outermost so it spans nodes), `data` (pure data parallel, may span DCN slices), `fsdp` (data parallel with
parameters sharded), `expert` (expert parallelism; also splits the batch outside MoE layers), `tensor`
(heads / FFN width), `context` (sequence, for ring attention). Any axis may be 1.

Axis types: we build meshes with `AxisType.Auto` on purpose. The code annotates parameters with logical names
(`nn.with_logical_partitioning`) and activations with `with_logical_constraint`, and lets GSPMD propagate the rest;
collectives that must be explicit (MoE all-to-all, ring ppermute) live in small `shard_map` functions. JAX >= 0.10
defaults `jax.make_mesh` to Explicit axes, under which every reshape of a sharded array would need an
`out_sharding`; that is the opposite style, so every mesh here is made through `make_mesh` below.

Inter-node placement: `jax.make_mesh` orders devices process by process, so the outermost axes (`stage`, then
`data`) are the ones that cross hosts; a pipeline's point-to-point activation sends are the cheapest traffic to put
on the slow network. Multi-slice (DCN): when the devices report more than one `slice_index` (TPU multislice, or GPU
hosts that set it), `make_mesh` lays `stage` and then `data` across slices with
`mesh_utils.create_hybrid_device_mesh` (DCN shape (gcd(stage, slices), slices/gcd, 1, 1, 1, 1)), so only the
pipeline sends and the pure data-parallel gradient all-reduce cross the slow network.

Placement: the model's code never reads an ambient mesh or ambient rules. The caller (the train step's model
`Transformer(cfg, mesh)`, an engine, the pipeline's stage program) gives a `Placement` (mesh, rules, and whether the
code traces per shard), which every module carries down to MoE, attention and the context-parallel kernels;
`Placement.constrain` is the one sharding constraint on activations. `activate(mesh)` still makes a mesh and the
rules ambient for what JAX and flax read themselves (jit's PartitionSpec shardings, parameter boxes at init).

Start-up check: `validate_model_mesh(cfg, mesh, batch, seq_len)` checks every model dimension against the mesh
axes the table maps it to (experts by `expert`, heads and FFN widths by `tensor`, sequence by `context`, batch by
stage×data×fsdp×expert, ...) and raises one error naming both numbers; the trainer calls it before building state.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Mapping, Optional, Sequence, Union

import jax
import numpy as np
from flax import linen as nn
from jax.experimental import mesh_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from composer2_jax import schema

MESH_AXES = ("stage", "data", "fsdp", "expert", "tensor", "context")

# The one rules table: logical axis name -> mesh axes (None = replicated). Parameters and activations both.
LOGICAL_RULES: tuple[tuple[str, Optional[str | tuple[str, ...]]], ...] = (
    # activations
    # the batch: also over `stage` outside a pipelined stack (embedding, dense prefix, head, MTP and loss are not
    # repeated per stage); inside a stage (`within_stage`) the stage vmap owns `stage`
    ("activation_batch", ("stage", "data", "fsdp", "expert")),
    ("activation_length", "context"),
    ("activation_embed", None),
    ("activation_heads", "tensor"),
    ("activation_kv", None),
    ("activation_mlp", "tensor"),
    ("activation_vocab", "tensor"),
    ("activation_exp", "expert"),
    # parameters
    ("vocab", "tensor"),
    ("embed", ("fsdp", "context")),  # the context axis is more FSDP for parameters (as in MaxText): a 256k
    # run with context 8 keeps parameters and optimizer state 1/(fsdp·context) per device, not 1/fsdp
    ("heads", "tensor"),
    # MLA's latent dims, FSDP-sharded like `embed`: W_qb [q_lora, H, N+R] and W_kvb [kv_lora, H, N+V] have no `embed`
    # dim, so without this they were replicated over fsdp (kimi_k2_5 on fsdp=32: 6.5 of 23.3 GB of parameters per
    # device). W_qa / W_kva ([embed, q_lora | kv_lora]) keep `embed` on fsdp and the latent replicated (a mesh
    # axis is used once per spec)
    ("q_lora", ("fsdp", "context")),
    ("kv_lora", ("fsdp", "context")),
    ("kv", None),
    ("mlp", "tensor"),
    ("exp", "expert"),
    ("moe_mlp", "tensor"),
    ("layers", "stage"),  # the scanned stack's unit axis: contiguous blocks of units per pipeline stage
    ("norm", None),
)


@dataclasses.dataclass(frozen=True)
class MeshConfig:
    """Sizes of the six mesh axes; their product must equal the device count (one axis may be -1: the rest)."""

    stage: int = 1  # pipeline parallelism: the scanned decoder stack split into stages (outermost: across nodes)
    data: int = 1  # pure data parallelism (replicated parameters; spans DCN slices when there are several)
    fsdp: int = -1  # data parallelism with parameters and optimizer state sharded (ZeRO-3); -1: the rest
    expert: int = 1  # expert parallelism: routed experts split over this axis, tokens moved by all-to-all
    tensor: int = 1  # tensor parallelism: heads and FFN widths split
    context: int = 1  # context parallelism: sequence split, ring attention over this axis (zigzag rows)

    def __post_init__(self):
        for a in MESH_AXES:
            s = getattr(self, a)
            if not isinstance(s, int) or s == 0 or s < -1:
                raise ValueError(f"mesh.{a}={s!r}; expected a positive size or -1 (the rest of the devices)")

    def shape(self, n_devices: int) -> tuple[int, ...]:
        """Resolve the one -1 axis (if any) and check the product against the device count."""
        sizes = [getattr(self, a) for a in MESH_AXES]
        free = [i for i, s in enumerate(sizes) if s == -1]
        if len(free) > 1:
            raise schema.ConfigError(f"at most one mesh axis may be -1, got {dict(zip(MESH_AXES, sizes))}")
        fixed = math.prod(s for s in sizes if s != -1)
        if free:
            if n_devices % fixed:
                raise schema.ConfigError(f"{n_devices} devices cannot be split into mesh "
                                         f"{dict(zip(MESH_AXES, sizes))}: "
                                 f"the fixed axes multiply to {fixed}, which does not divide {n_devices}")
            sizes[free[0]] = n_devices // fixed
        if math.prod(sizes) != n_devices:
            raise schema.ConfigError(f"mesh {dict(zip(MESH_AXES, sizes))} has {math.prod(sizes)} devices, "
                             f"but {n_devices} are available")
        return tuple(sizes)


def make_mesh(cfg: MeshConfig | Mapping[str, int] | None = None, devices: Optional[Sequence] = None) -> Mesh:
    """A 6-axis Auto-typed mesh over `devices` (default: all); `data` spans DCN slices when there are several."""
    if cfg is None:
        cfg = MeshConfig()
    elif not isinstance(cfg, MeshConfig):
        cfg = dict(cfg.to_dict() if hasattr(cfg, "to_dict") else cfg)  # ml_collections ConfigDict or a mapping
        unknown = sorted(set(cfg) - set(MESH_AXES))
        if unknown:
            raise ValueError(f"unknown mesh axes {unknown}; expected names from {MESH_AXES}")
        cfg = MeshConfig(**{a: cfg.get(a, 1) for a in MESH_AXES})  # axes a mapping does not name are 1
    all_devices = devices is None or list(devices) == jax.devices()
    devices = list(devices) if devices is not None else jax.devices()
    shape = cfg.shape(len(devices))
    auto = (jax.sharding.AxisType.Auto,) * len(MESH_AXES)
    if num_slices(devices) > 1:
        return Mesh(device_grid(shape, devices), MESH_AXES, axis_types=auto)
    if all_devices:
        return jax.make_mesh(shape, MESH_AXES, axis_types=auto)
    return Mesh(np.asarray(devices).reshape(shape), MESH_AXES, axis_types=auto)


def num_slices(devices: Sequence) -> int:
    """Distinct `slice_index` values among the devices (1 when the platform does not report slices)."""
    return len({getattr(d, "slice_index", 0) for d in devices})


def device_grid(shape: Sequence[int], devices: Sequence) -> np.ndarray:
    """Devices arranged as `shape`; with several slices, `stage` then `data` are split over DCN, the rest stays
    inside."""
    n = num_slices(devices)
    if n == 1:
        return np.asarray(devices).reshape(shape)
    stage, data = shape[MESH_AXES.index("stage")], shape[MESH_AXES.index("data")]
    stage_dcn = math.gcd(stage, n)
    data_dcn = n // stage_dcn
    if data % data_dcn:
        raise ValueError(f"the devices span {n} slices; mesh axis stage={stage} covers {stage_dcn} of them, so data="
                         f"{data} must be a multiple of the remaining {data_dcn}: multi-slice runs put only the "
                         f"stage and data axes on the slow DCN network")
    dcn = (stage_dcn, data_dcn) + (1,) * (len(shape) - 2)
    ici = tuple(s // d for s, d in zip(shape, dcn))
    return mesh_utils.create_hybrid_device_mesh(ici, dcn, devices, allow_split_physical_axes=True)


@contextlib.contextmanager
def activate(mesh: Mesh, rules=LOGICAL_RULES):
    """Make `mesh` and the logical rules ambient for what JAX and flax read themselves (jit with PartitionSpec
    shardings, `nn.with_logical_partitioning` boxes at init); the model's own code takes its `Placement`."""
    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        yield


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where model code runs, given explicitly from the caller down (hashable: a flax module field).

    mesh None: one program, activation constraints are no-ops (one device, or XLA places everything).
    per_shard: the code traces inside a shard_map manual over every mesh axis (model/pipeline.py `_run_per_shard`),
    where arrays are per-device blocks: constraints are no-ops and the MoE block runs its per-shard body directly.
    """

    mesh: Optional[Mesh] = None  # the (concrete or abstract) mesh the code is partitioned over
    rules: tuple = LOGICAL_RULES  # logical axis name -> mesh axes; inside a pipeline stage `within_stage(...)`
    per_shard: bool = False  # inside a shard_map manual over every mesh axis (arrays are local blocks)

    @classmethod
    def of(cls, where: Union["Placement", Mesh, None]) -> "Placement":
        """A Placement from a Placement (as is), a mesh (the project's rules, not per shard) or None (no mesh)."""
        if where is None or isinstance(where, Placement):
            return where or cls()
        if not hasattr(where, "axis_names"):
            raise TypeError(f"expected a Placement, a jax.sharding.Mesh or None, got {type(where).__name__}")
        return cls(where)

    def constrain(self, x, axes: Sequence[Optional[str]]):
        """Logical sharding constraint on an activation over this placement's mesh (a no-op without a mesh and in a
        per-shard program, where arrays are local blocks)."""
        if self.mesh is None or self.per_shard:
            return x
        return nn.with_logical_constraint(x, tuple(axes), rules=self.rules, mesh=self.mesh)

    def axis_size(self, logical: str) -> int:
        """Devices the logical axis is split over (1 without a mesh)."""
        return 1 if self.mesh is None else axis_size(self.mesh, mesh_axes_of(logical, self.rules))

    def stage(self, per_shard: bool = False) -> "Placement":
        """The placement inside one pipeline stage's body: the rules without `stage` (`within_stage`), per shard
        when the schedule runs as one per-shard program (model/pipeline.py)."""
        return dataclasses.replace(self, rules=within_stage(self.rules), per_shard=per_shard)


def within_stage(rules=LOGICAL_RULES):
    """The rules inside one pipeline stage's body (model/pipeline.py): every rule with `stage` dropped, since the
    stage `vmap` (`spmd_axis_name='stage'`) already places its mapped axis on `stage`."""
    def drop(axes):
        if axes is None or isinstance(axes, str):
            return None if axes == "stage" else axes
        kept = tuple(a for a in axes if a != "stage")
        return kept if len(kept) > 1 else (kept[0] if kept else None)

    return tuple((name, drop(axes)) for name, axes in rules)


# The mesh axes that shard parameters as ZeRO-3 / FSDP does (gathered before use, gradients reduce-scattered):
# `fsdp`, and `context`, which the rules table uses as more FSDP for parameters (`embed`).
FSDP_PARAM_AXES = ("fsdp", "context")


def gathered_param_rules(rules=LOGICAL_RULES, axes=FSDP_PARAM_AXES):
    """`rules` with the FSDP axes dropped: a parameter laid out by them is gathered over `fsdp` and `context` and
    keeps its other splits (`stage` for the stack's units, `expert` for routed experts, `tensor`). Meant for
    parameter names only (the activation rules lose `fsdp` as well)."""
    def drop(ax):
        if ax is None or isinstance(ax, str):
            return None if ax in axes else ax
        kept = tuple(a for a in ax if a not in axes)
        return kept if len(kept) > 1 else (kept[0] if kept else None)

    return tuple((name, drop(ax)) for name, ax in rules)


def per_shard_param_spec(logical: Sequence[Optional[str]], rules=LOGICAL_RULES) -> P:
    """The block of a stack parameter that one device holds in the pipeline's per-shard schedule
    (model/pipeline.py `_run_per_shard`): gathered over every axis but the routed experts' leading `exp` dimension,
    which stays split like the MoE block's expert-parallel shard_map takes it (model/expert_parallel.py)."""
    lead = tuple(logical)[:1] == ("exp",)
    return P(*[nn.logical_to_mesh_axes(("exp",), rules)[0] if (i == 0 and lead) else None
               for i in range(len(tuple(logical)))])


def logical_to_spec(logical: Sequence[Optional[str]], rules=LOGICAL_RULES) -> P:
    """PartitionSpec of one array from its logical axis names."""
    return nn.logical_to_mesh_axes(tuple(logical), rules)


def _axis_size(mesh: Mesh, axes) -> int:
    if axes is None:
        return 1
    axes = (axes,) if isinstance(axes, str) else axes
    return math.prod(mesh.shape[a] for a in axes)


def axis_size(mesh, axes) -> int:
    """Product of the sizes of mesh axes (a name, a tuple of names, or None = 1); absent axes count as 1."""
    if axes is None:
        return 1
    axes = (axes,) if isinstance(axes, str) else axes
    return math.prod(dict(mesh.shape).get(a, 1) for a in axes)


def mesh_axes_of(logical: str, rules=LOGICAL_RULES) -> tuple[str, ...]:
    """The mesh axes one logical name maps to, as a tuple (empty = replicated)."""
    for name, axes in rules:
        if name == logical:
            return () if axes is None else ((axes,) if isinstance(axes, str) else tuple(axes))
    raise KeyError(f"logical axis {logical!r} is not in the rules table")


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


def model_dims(cfg, batch: int, seq_len: int) -> list[tuple[str, str, int]]:
    """(logical axis, what, size) of every sharded model dimension of `cfg` at this batch and sequence length."""
    dims = [("activation_batch", "global batch", batch), ("activation_length", "seq_len", seq_len),
            ("heads", "model.num_heads", cfg.num_heads), ("vocab", "model.vocab_size", cfg.vocab_size),
            ("embed", "model.hidden_size", cfg.hidden_size), ("mlp", "model.intermediate_size", cfg.intermediate_size)]
    if cfg.n_routed_experts:
        dims += [("exp", "model.n_routed_experts", cfg.n_routed_experts),
                 ("moe_mlp", "model.moe_intermediate_size", cfg.moe_intermediate_size),
                 ("mlp", "model.moe_intermediate_size × n_shared_experts",
                  cfg.moe_intermediate_size * max(cfg.n_shared_experts, 1))]
    return dims


def validate_model_mesh(cfg, mesh, batch: int, seq_len: int, rules=LOGICAL_RULES):
    """Raise if the mesh does not divide a model dimension it shards (errors name both numbers).

    Args:
      cfg: the frozen `ModelConfig`.
      mesh: the (concrete or abstract) mesh the trainer will run on.
      batch: the global batch (sequences per step).
      seq_len: tokens per sequence.
    """
    for logical, what, size in model_dims(cfg, batch, seq_len):
        axes = mesh_axes_of(logical, rules)
        n = axis_size(mesh, axes)
        if size % n:
            sizes = {a: dict(mesh.shape).get(a, 1) for a in axes}
            names = "×".join(f"{a}={k}" for a, k in sizes.items() if k > 1)  # axes of size 1 split nothing
            raise ValueError(f"{what}={size} is not divisible by mesh axes {names} (= {n}), which shard "
                             f"logical axis {logical!r}")
