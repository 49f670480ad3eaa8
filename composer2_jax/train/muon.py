"""Muon whose Newton–Schulz orthogonalisation is spread over every device of the mesh.

Muon (Jordan 2024; Liu et al. 2025, "Muon is Scalable for LLM Training") replaces each hidden matrix's update by
the orthogonalised Nesterov momentum:

    m_t  = β m_{t−1} + (1 − β) g_t                       (bias-corrected, Nesterov: β m̂_t + (1 − β) ĝ_t)
    O_t  = NS₅(M)  with  X₀ = M / (‖M‖_F + ε),  X_{k+1} = a X_k + (b A + c A²) X_k,  A = X_k X_kᵀ,
         (a, b, c) = (3.4445, −4.7750, 2.0315),  iterating on the wide orientation (rows ≤ cols)
    Δ    = −lr · (√max(fan_in, fan_out) · rms · O_t + λ W)   (Moonlight's update-RMS matching; decoupled decay)

Why not `optax.contrib.muon` as is: its orthogonalisation flattens the stacked axes (scanned layers × experts) and
runs matmuls over the matrix dimensions, which FSDP shards. XLA's partitioner then all-gathers those dimensions —
for Kimi K2.5's routed experts, [60 layers × 384 experts, 7168, 2048] fp32 = 1.35 TB gathered on every device
(docs/scaling.md). Each of those matrices is independent, so the distributed form here trades the stack for the
matrix dimensions instead, inside `jax.shard_map` (`orthogonalize`):

    [L, E/8, D/32, F] on each device  →(all-to-all over fsdp)→  [L·E/8/32, D, F]: whole matrices, 90 per device
    →  NS₅ locally  →(all-to-all back)→  [L, E/8, D/32, F]

— each device sends and receives its own shard once each way; mesh axes that replicate the parameter (data,
context) split the stack further and all-gather the result. Stacks not divisible by the split are padded with zero
matrices (NS of 0 is 0). Given no PartitionSpecs, or no mesh (`muon(..., sharding=NSSharding(specs, mesh))`, from
`make_optimizer`), NS runs as one program and XLA places it.

The state is optax's `MuonState(count, mu, ns_coeffs)`, so checkpoints of either implementation restore into
the other; `tests/test_optim_muon.py` checks this one against `optax.contrib.muon` and sharded against unsharded.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax
from jax.sharding import PartitionSpec as P
from optax.contrib import MuonDimensionNumbers, MuonState

NS_COEFFS = (3.4445, -4.7750, 2.0315)  # quintic Newton–Schulz, maximal slope at 0 (Jordan 2024)


def newton_schulz(x: jax.Array, steps: int = 5, eps: float = 1e-8, coeffs=NS_COEFFS) -> jax.Array:
    """NS₅ of a batch of matrices x [B, m, n] (see the module docstring); the wide orientation is used inside."""
    tall = x.shape[-2] > x.shape[-1]
    if tall:
        x = jnp.swapaxes(x, -1, -2)
    x = x / (jnp.sqrt(jnp.sum(jnp.square(x), axis=(-2, -1), keepdims=True)) + eps)
    a, b, c = coeffs
    for _ in range(steps):
        gram = jnp.einsum("bij,bkj->bik", x, x)
        poly = b * gram + c * jnp.einsum("bij,bjk->bik", gram, gram)
        x = a * x + jnp.einsum("bij,bjk->bik", poly, x)
    return jnp.swapaxes(x, -1, -2) if tall else x


def _axes(x: jax.Array, dims: MuonDimensionNumbers) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(batch, reduction, output) axes of x under Muon dimension numbers."""
    as_tuple = lambda a: (a,) if isinstance(a, int) else tuple(a)  # noqa: E731
    red = tuple(a % x.ndim for a in as_tuple(dims.reduction_axis))
    out = tuple(a % x.ndim for a in as_tuple(dims.output_axis))
    if set(red) & set(out):
        raise ValueError(f"Muon reduction axes {red} and output axes {out} overlap for a parameter of shape {x.shape}")
    batch = tuple(a for a in range(x.ndim) if a not in red and a not in out)
    return batch, red, out


def fans(x: jax.Array, dims: MuonDimensionNumbers) -> tuple[int, int]:
    """(fan_in, fan_out) = products of the reduction and output axes."""
    _, red, out = _axes(x, dims)
    return math.prod(x.shape[a] for a in red), math.prod(x.shape[a] for a in out)


def _mesh_axes(entry, mesh) -> tuple[str, ...]:
    """Mesh axes of size > 1 in one PartitionSpec entry."""
    names = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
    return tuple(a for a in names if mesh.shape.get(a, 1) > 1)


def orthogonalize(x: jax.Array, dims: MuonDimensionNumbers, spec: P | None = None, steps: int = 5,
                  eps: float = 1e-8, mesh=None) -> jax.Array:
    """NS₅ of every matrix of x (batch axes stacked, reduction × output flattened).

    With `spec` (x's PartitionSpec on `mesh`) and a mesh of more than one device, the work is distributed: inside
    `jax.shard_map`, each mesh axis that shards a matrix dimension is traded for the stacked batch with one tiled
    all-to-all (every device then holds whole matrices, a 1/n share of its group's), mesh axes that replicate x
    split the batch further while it has enough matrices (and all-gather the result), NS₅ runs locally, and the
    trades are undone. Batches not divisible by the split are padded with zero matrices. Without a spec or a mesh:
    one program, and XLA places it.
    """
    batch, red, out = _axes(x, dims)
    perm = batch + red + out
    fan_in, fan_out = fans(x, dims)
    xt = jnp.transpose(x, perm)
    if spec is None or mesh is None or mesh.size == 1:
        flat = xt.reshape((-1, fan_in, fan_out))
        ot = newton_schulz(flat, steps, eps).reshape(xt.shape)
        return jnp.transpose(ot, tuple(perm.index(a) for a in range(x.ndim)))
    entries = tuple(spec) + (None,) * (x.ndim - len(spec))
    placed = [_mesh_axes(entries[a], mesh) for a in perm]
    nb = len(batch)
    traded = [(i, axes) for i, axes in enumerate(placed) if i >= nb and axes]  # matrix dims that are sharded
    size = lambda axes: math.prod(mesh.shape[a] for a in axes)  # noqa: E731
    used = {a for axes in placed for a in axes}
    trade = size([a for _, axes in traded for a in axes])
    # Axes that replicate x split the work further, but only while each device still gets a real matrix: splitting
    # a handful of matrices over many devices would all-gather mostly padding.
    per_device = -(-math.prod(xt.shape[i] // size(placed[i]) for i in range(nb)) // trade)
    idle: tuple[str, ...] = ()
    for a in mesh.axis_names:
        if mesh.shape[a] > 1 and a not in used and per_device >= size(idle + (a,)):
            idle += (a,)
    split = trade * size(idle)
    local_spec = P(*[axes if axes else None for axes in placed])

    def local(block):
        flat = block.reshape((-1,) + block.shape[nb:])
        count = flat.shape[0]
        if -count % split:
            flat = jnp.concatenate([flat, jnp.zeros((-count % split,) + flat.shape[1:], flat.dtype)])
        for i, axes in traded:  # [b, .., D/n, ..] → [b/n, .., D, ..]
            flat = jax.lax.all_to_all(flat, axes, 0, 1 + i - nb, tiled=True)
        if idle:
            share = flat.shape[0] // size(idle)
            flat = jax.lax.dynamic_slice_in_dim(flat, jax.lax.axis_index(idle) * share, share, 0)
        o = newton_schulz(flat.reshape((-1, fan_in, fan_out)), steps, eps).reshape(flat.shape)
        if idle:
            o = jax.lax.all_gather(o, idle, axis=0, tiled=True)
        for i, axes in reversed(traded):
            o = jax.lax.all_to_all(o, axes, 1 + i - nb, 0, tiled=True)
        return o[:count].reshape(block.shape)

    # check_vma off: the all-gather over `idle` makes the result equal across those axes, which the type system does
    # not infer after the axis_index slice.
    ot = jax.shard_map(local, mesh=mesh, in_specs=local_spec, out_specs=local_spec, check_vma=False)(xt)
    return jnp.transpose(ot, tuple(perm.index(a) for a in range(x.ndim)))


def scale_by_muon(dims_fn: Callable[[Any], Any], specs_fn: Callable[[Any], Any] | None = None, beta: float = 0.95,
                  steps: int = 5, eps: float = 1e-8, mesh=None) -> optax.GradientTransformation:
    """Nesterov momentum → NS₅ (module docstring). `dims_fn(updates)` gives the MuonDimensionNumbers per leaf
    (every array leaf it is given is a Muon matrix); `specs_fn(updates)` their PartitionSpecs on `mesh` (None, or
    no mesh: let XLA place the orthogonalisation)."""
    def init(params):
        return MuonState(count=jnp.zeros([], jnp.int32), mu=jax.tree.map(jnp.zeros_like, params),
                         ns_coeffs=jnp.asarray(NS_COEFFS))

    def update(updates, state, params=None):
        del params
        count = optax.safe_increment(state.count)
        mu = jax.tree.map(lambda m, g: beta * m + (1 - beta) * g, state.mu, updates)
        c = count.astype(jnp.float32)
        bc_mu, bc_g = 1 - beta ** (c + 1), 1 - beta ** c  # Nesterov: m̂ one step ahead, ĝ at this step
        nesterov = jax.tree.map(lambda m, g: beta * m / bc_mu + (1 - beta) * g / bc_g, mu, updates)
        if specs_fn is None:
            out = jax.tree.map(lambda x, d: orthogonalize(x, d, None, steps, eps), nesterov, dims_fn(updates))
        else:
            out = jax.tree.map(lambda x, d, p: orthogonalize(x, d, p, steps, eps, mesh), nesterov, dims_fn(updates),
                               specs_fn(updates))
        return out, MuonState(count=count, mu=mu, ns_coeffs=state.ns_coeffs)

    return optax.GradientTransformation(init, update)


def scale_by_rms_match(dims_fn: Callable[[Any], Any], consistent_rms: float | None) -> optax.GradientTransformation:
    """Moonlight's RMS matching √max(fan_in, fan_out)·rms; with rms None, width scaling √max(1, fan_out / fan_in)."""
    def scale(o, dims):
        fan_in, fan_out = fans(o, dims)
        if consistent_rms is None:
            return o * math.sqrt(max(1.0, fan_out / fan_in))
        return o * (math.sqrt(max(fan_in, fan_out)) * consistent_rms)

    def update(updates, state, params=None):
        del params
        return jax.tree.map(scale, updates, dims_fn(updates)), state

    return optax.GradientTransformation(optax.init_empty_state, update)


@dataclasses.dataclass(frozen=True)
class AdamFallback:
    """AdamW (Nesterov) on the leaves Muon does not orthogonalise: `optax.contrib.muon`'s adam_* arguments."""

    b1: float = 0.9  # first-moment decay
    b2: float = 0.999  # second-moment decay
    eps: float = 1e-8  # added to the second-moment root
    weight_decay: float = 0.0  # decoupled weight decay of those leaves


@dataclasses.dataclass(frozen=True)
class NSSharding:
    """Where the Newton–Schulz work is spread (`orthogonalize`): static, never traced."""

    specs: Any  # a tree like `dims` of the parameters' PartitionSpecs on `mesh` (None: let XLA place NS)
    mesh: Any = None  # the mesh the train step runs on, given explicitly (None: one program)


def muon(learning_rate, dims, *, beta: float = 0.95, weight_decay: float = 0.0, weight_decay_mask=None,
         adam: AdamFallback = AdamFallback(), consistent_rms: float | None = 0.2,
         sharding: NSSharding | None = None) -> optax.GradientTransformation:
    """Muon on the leaves whose `dims` entry is MuonDimensionNumbers, AdamW (Nesterov) on the ones that are None.

    The same partition and chain as `optax.contrib.muon` (so the state trees match); `adam` holds what that
    function calls adam_b1, adam_b2, adam_eps and adam_weight_decay. `sharding`, the parameters' PartitionSpecs on
    a mesh, turns on the distributed orthogonalisation (`orthogonalize`).
    """
    specs, mesh = (None, None) if sharding is None else (sharding.specs, sharding.mesh)
    is_dims = lambda d: d is None or isinstance(d, MuonDimensionNumbers)  # noqa: E731
    labels = jax.tree.map(lambda d: "adam" if d is None else "muon", dims, is_leaf=is_dims)

    def muon_dims(updates):
        # partition() hands the muon branch the whole tree with MaskedNode() on adam leaves; mirror it, so that the
        # dimension numbers sit exactly where the muon arrays are (a prefix tree of `updates`).
        return jax.tree.map(lambda d, u: u if d is None else d, dims, updates, is_leaf=is_dims)

    def muon_specs(updates):
        return jax.tree.map(lambda d, p, u: u if d is None else p, dims, specs, updates, is_leaf=is_dims)

    return optax.partition(
        {"muon": optax.chain(scale_by_muon(muon_dims, None if specs is None else muon_specs, beta, mesh=mesh),
                             scale_by_rms_match(muon_dims, consistent_rms),
                             optax.add_decayed_weights(weight_decay, weight_decay_mask),
                             optax.scale_by_learning_rate(learning_rate)),
         "adam": optax.adamw(learning_rate, adam.b1, adam.b2, adam.eps, weight_decay=adam.weight_decay,
                             nesterov=True)},
        labels)
