"""Grouped expert matmuls (rows grouped by expert, one weight matrix per group), fast on every backend.

Two implementations with identical results:
  ragged  `jax.lax.ragged_dot` over rows sorted by group. The portable reference; on CPU it lowers to a masked dense
          matmul over all groups (E× the work), fine for tests at toy sizes.
  padded  rows scattered into a tile-padded `[E, C, D]` buffer (C = a static slot count per expert, a multiple of the
          backend tile), then one batched einsum `ECD,EDF->ECF`. On the lent H200 this ran many times faster than
          ragged_dot (measured figures: docs/design.md, "Facts measured on one H200"), so GPUs default to it.
A padded buffer holds at most C rows per expert. Callers size C for the expected load (`padded_capacity`); when a
group is larger at run time, `lax.cond` takes the ragged path instead, so results stay exact for any routing. That
switch is a fallback (kernel_paths.py): each run of the ragged branch is counted on the host, and in strict mode no
ragged branch is compiled at all — a host check raises instead when a group outgrows C.

`resolve_impl('auto')` picks per `jax.default_backend()`: gpu → padded (measured), tpu → ragged (XLA:TPU has a
native grouped-matmul lowering; not measured here), cpu → ragged.
"""

from __future__ import annotations

import math
from typing import Optional

import jax
import jax.numpy as jnp

from composer2_jax.model import fp8, kernel_paths

GMM_IMPLS = ("ragged", "padded")
_AUTO_IMPL = {"gpu": "padded", "cuda": "padded", "rocm": "padded", "tpu": "ragged", "cpu": "ragged"}
_TILE = {"gpu": 128, "cuda": 128, "rocm": 128, "tpu": 128, "cpu": 8}
SITE = "grouped_matmul"  # kernel_paths site of both entry points


def resolve_impl(impl: str = "auto", backend: Optional[str] = None) -> str:
    """'ragged' or 'padded': `impl` itself, or the backend's default for 'auto'."""
    if impl == "auto":
        return _AUTO_IMPL.get(backend or jax.default_backend(), "ragged")
    if impl not in GMM_IMPLS:
        raise ValueError(f"grouped matmul impl {impl!r}; expected 'auto' or one of {GMM_IMPLS}")
    return impl


def tile_rows(backend: Optional[str] = None) -> int:
    """Row multiple that padded expert buffers are rounded up to on this backend."""
    return _TILE.get(backend or jax.default_backend(), 128)


def round_up(n: int, m: int) -> int:
    """Smallest multiple of m that is >= n."""
    return -(-n // m) * m


def padded_capacity(n_rows: int, n_groups: int, slack: float, tile: Optional[int] = None) -> int:
    """Static slots per expert for the padded path: slack × the mean group size, tile-rounded, at most n_rows."""
    tile = tile or tile_rows()
    return min(round_up(max(1, math.ceil(slack * n_rows / n_groups)), tile), n_rows)


def group_starts(sizes_E):
    """Exclusive cumulative sum: the first row of each group in a group-sorted buffer [E]."""
    return jnp.cumsum(sizes_E) - sizes_E


def sorted_groups(sizes_E, n_rows: int):
    """(group id, slot within the group) of each row of a group-sorted buffer; rows past the groups get id E."""
    ends_E = jnp.cumsum(sizes_E)
    row_X = jnp.arange(n_rows, dtype=jnp.int32)
    e_X = jnp.searchsorted(ends_E, row_X, side="right").astype(jnp.int32)  # [X]
    pos_X = row_X - jnp.take(group_starts(sizes_E), e_X, mode="clip")
    return e_X, pos_X


def _place(x_SD, src_R, dest_R, n_slots: int):
    """Buffer [n_slots, D] whose slot dest_R[r] holds source row src_R[r] (dest out of range: dropped; empty: 0).

    One gather of the float rows; the row-to-slot map is composed on integer indices first.
    """
    src_of_slot = jnp.full((n_slots,), x_SD.shape[0], jnp.int32).at[dest_R].set(src_R.astype(jnp.int32), mode="drop")
    return jnp.take(x_SD, src_of_slot, axis=0, mode="fill", fill_value=0)


def _fetch(buf_SD, dest_R):
    """Rows of buf at dest_R (0 where dest is out of range): the inverse of `_place`."""
    return jnp.take(buf_SD, dest_R, axis=0, mode="fill", fill_value=0)


def _bmm(x_EMK, w_EKN):
    """Per-expert matmul `EMK,EKN->EMN`: block-scaled FP8 inside an 'fp8' `fp8.precision_scope` (model/fp8.py)."""
    if fp8.current_precision() == "fp8":
        return fp8.fp8_einsum_batched(x_EMK, w_EKN)
    return jnp.einsum("EMK,EKN->EMN", x_EMK, w_EKN)


def _ragged_dot(xs_XK, w_EKN, sizes_E):
    """`lax.ragged_dot`: block-scaled FP8 inside an 'fp8' `fp8.precision_scope` (model/fp8.py)."""
    if fp8.current_precision() == "fp8":
        return fp8.fp8_ragged_dot(xs_XK, w_EKN, sizes_E)
    return jax.lax.ragged_dot(xs_XK, w_EKN, sizes_E)


def swiglu_ecd(x_ECD, wi_gate_EDF, wi_up_EDF, wo_EFD):
    """SwiGLU experts on a padded buffer with batched einsums: [E, C, D] -> [E, C, D]."""
    h_ECF = jax.nn.silu(_bmm(x_ECD, wi_gate_EDF)) * _bmm(x_ECD, wi_up_EDF)
    return _bmm(h_ECF, wo_EFD)


def swiglu_ragged(xs_XD, sizes_E, wi_gate_EDF, wi_up_EDF, wo_EFD):
    """SwiGLU experts on group-sorted rows with `lax.ragged_dot` (rows past sum(sizes) give 0): [X, D] -> [X, D]."""
    h_XF = jax.nn.silu(_ragged_dot(xs_XD, wi_gate_EDF, sizes_E)) * _ragged_dot(xs_XD, wi_up_EDF, sizes_E)
    return _ragged_dot(h_XF, wo_EFD, sizes_E)


def _ragged_rows(x_SD, src_R, e_R, pos_R, sizes_E, weights):
    """Ragged path: gather the rows into group order, ragged_dot SwiGLU, read each row's output back."""
    e, r = sizes_E.shape[0], src_R.shape[0]
    dest_R = jnp.where(e_R < e, jnp.take(group_starts(sizes_E), e_R, mode="clip") + pos_R, r)
    ys_RD = swiglu_ragged(_place(x_SD, src_R, dest_R, r), sizes_E, *weights)
    return _fetch(ys_RD, dest_R)


def _padded_rows(x_SD, src_R, e_R, pos_R, sizes_E, weights, capacity: int):
    """Padded path: gather the rows into [E, C, D], batched einsum, read each row's output back."""
    e, d = sizes_E.shape[0], x_SD.shape[1]
    dest_R = jnp.where((e_R < e) & (pos_R < capacity), e_R * capacity + pos_R, e * capacity)
    x_ECD = _place(x_SD, src_R, dest_R, e * capacity).reshape(e, capacity, d)  # [E, C, D]
    y_ECD = swiglu_ecd(x_ECD, *weights)
    return _fetch(y_ECD.reshape(e * capacity, d), dest_R)


def _padded_alone(sizes_E, capacity: int, rows: int) -> bool:
    """Whether the padded path runs with no ragged branch (C ≥ rows, or strict mode: overflow checked on the host);
    records the path in kernel_paths."""
    if capacity >= rows:
        kernel_paths.record(SITE, "padded")
        return True
    if kernel_paths.is_strict():
        kernel_paths.record(SITE, "padded")
        kernel_paths.runtime_check(SITE, jnp.max(sizes_E), capacity, "largest expert group exceeds its padded slots:")
        return True
    kernel_paths.record(SITE, "padded+ragged_on_overflow")
    return False


def grouped_swiglu(x_SD, e_R, pos_R, sizes_E, weights, impl: str = "auto", capacity: Optional[int] = None,
                   src_R=None):
    """SwiGLU of R rows, each with its expert's weights = (wi_gate [E, D, F], wi_up [E, D, F], wo [E, F, D]) (e.g.
    expert_parallel.Experts): row r is x_SD[src_R[r]] (default: x_SD[r]), at slot pos_R[r] of group e_R[r]; e_R = E
    marks padding (output 0). Returns [R, D] in row order.

    `capacity` (padded path only) is the static slot count per expert, default R (always fits). If a group outgrows
    it at run time, the exact ragged path runs instead (`lax.cond`), so the result never depends on it; in strict
    mode (kernel_paths.py) that is an error instead.
    """
    weights = tuple(weights)
    r = e_R.shape[0]
    src_R = jnp.arange(r, dtype=jnp.int32) if src_R is None else src_R
    if resolve_impl(impl) == "ragged":
        kernel_paths.record(SITE, "ragged")
        return _ragged_rows(x_SD, src_R, e_R, pos_R, sizes_E, weights)
    capacity = r if capacity is None else min(capacity, r)
    if _padded_alone(sizes_E, capacity, r):
        return _padded_rows(x_SD, src_R, e_R, pos_R, sizes_E, weights, capacity)

    def ragged(*a):
        kernel_paths.runtime_fallback(SITE)
        return _ragged_rows(*a)

    return jax.lax.cond(jnp.max(sizes_E) <= capacity, lambda *a: _padded_rows(*a, capacity), ragged,
                        x_SD, src_R, e_R, pos_R, sizes_E, weights)


def grouped_matmul(xs_XD, w_EDF, sizes_E, impl: str = "auto", capacity: Optional[int] = None):
    """One grouped matmul on group-sorted rows: row x of group e times w[e]. [X, D] -> [X, F]."""
    if resolve_impl(impl) == "ragged":
        kernel_paths.record(SITE, "ragged")
        return jax.lax.ragged_dot(xs_XD, w_EDF, sizes_E)
    x, d = xs_XD.shape
    e = sizes_E.shape[0]
    capacity = x if capacity is None else min(capacity, x)
    e_X, pos_X = sorted_groups(sizes_E, x)

    def padded(xs_XD, w_EDF, sizes_E):
        dest_X = jnp.where((e_X < e) & (pos_X < capacity), e_X * capacity + pos_X, e * capacity)
        x_ECD = _place(xs_XD, jnp.arange(x, dtype=jnp.int32), dest_X, e * capacity).reshape(e, capacity, d)
        y_ECF = jnp.einsum("ECD,EDF->ECF", x_ECD, w_EDF)
        return _fetch(y_ECF.reshape(e * capacity, -1), dest_X)

    if _padded_alone(sizes_E, capacity, x):
        return padded(xs_XD, w_EDF, sizes_E)

    def ragged(a, w, s):
        kernel_paths.runtime_fallback(SITE)
        return jax.lax.ragged_dot(a, w, s)

    return jax.lax.cond(jnp.max(sizes_E) <= capacity, padded, ragged, xs_XD, w_EDF, sizes_E)
