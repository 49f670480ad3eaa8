"""Grouped matmul: the ragged_dot and padded-einsum paths give the same results (also past their static capacity).

"The same" is SHARDED_FP32: XLA:CPU lowers ragged_dot to a masked matmul that contracts over (E, D) together, so the
fp32 summation order differs from the einsum's; where both calls take the same kernel the results are bitwise equal.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from composer2_jax.model.grouped_matmul import (
    grouped_matmul,
    grouped_swiglu,
    padded_capacity,
    resolve_impl,
    sorted_groups,
)
from tests.tolerances import FP32_BLOCK, SHARDED_FP32

rng = np.random.default_rng(0)
SIZES = np.array([7, 0, 1, 12, 0, 3, 9, 0], np.int32)  # skewed, with empty groups; 32 rows in all


def _silu(x):
    return x / (1 + np.exp(-x))


def _per_row_reference(x, w, sizes):
    """Row by row: x[r] @ w[group of r]; rows past the groups are 0."""
    out = np.zeros((x.shape[0], w.shape[-1]))
    r = 0
    for g, s in enumerate(sizes):
        for _ in range(s):
            out[r] = x[r] @ w[g]
            r += 1
    return out


@pytest.mark.parametrize("capacity", [None, 16, 4])  # 4 < the largest group: the exact ragged fallback runs
def test_grouped_matmul_paths_identical(capacity):
    x = rng.normal(size=(36, 16)).astype(np.float32)  # 4 padding rows at the end
    w = rng.normal(size=(8, 16, 8)).astype(np.float32)
    ragged = grouped_matmul(jnp.asarray(x), jnp.asarray(w), jnp.asarray(SIZES), "ragged")
    padded = jax.jit(lambda a, b, s: grouped_matmul(a, b, s, "padded", capacity))(x, w, SIZES)
    np.testing.assert_allclose(np.asarray(padded), np.asarray(ragged), **SHARDED_FP32)
    np.testing.assert_allclose(np.asarray(ragged), _per_row_reference(x, w, SIZES), **FP32_BLOCK)


def _rows_in_random_order(n_rows, sizes):
    """(group, slot) of every row of a shuffled buffer holding the groups plus 3 padding rows (group E)."""
    e_sorted, pos_sorted = (np.asarray(a) for a in sorted_groups(jnp.asarray(sizes), n_rows))
    perm = rng.permutation(n_rows)
    return e_sorted[perm], pos_sorted[perm]


@pytest.mark.parametrize("capacity", [None, 4])
def test_grouped_swiglu_paths_identical_with_gradients(capacity):
    e, d, f = len(SIZES), 16, 8
    n_rows = int(SIZES.sum()) + 3
    e_R, pos_R = _rows_in_random_order(n_rows, SIZES)
    x = rng.normal(size=(n_rows, d)).astype(np.float32)
    ws = [(0.3 * rng.normal(size=s)).astype(np.float32) for s in ((e, d, f), (e, d, f), (e, f, d))]
    ct = rng.normal(size=(n_rows, d)).astype(np.float32)  # a fixed cotangent: the loss is linear in y

    def run(impl):
        def loss(x, *ws):
            y = grouped_swiglu(x, e_R, pos_R, jnp.asarray(SIZES), ws, impl=impl, capacity=capacity)
            return jnp.sum(y * ct), y
        (_, y), g = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2, 3), has_aux=True))(x, *ws)
        return y, g

    y_r, g_r = run("ragged")
    y_p, g_p = run("padded")
    np.testing.assert_allclose(np.asarray(y_p), np.asarray(y_r), **SHARDED_FP32)
    for a, b in zip(g_p, g_r):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), **SHARDED_FP32)
    ref = np.zeros((n_rows, d))
    for r in range(n_rows):
        if e_R[r] < e:
            g, u, o = (w[e_R[r]] for w in ws)
            ref[r] = (_silu(x[r] @ g) * (x[r] @ u)) @ o
    np.testing.assert_allclose(np.asarray(y_r), ref, **FP32_BLOCK)


def test_impl_choice_per_backend_and_capacity_rounding():
    assert resolve_impl("auto", "gpu") == "padded" and resolve_impl("auto", "cpu") == "ragged"
    assert resolve_impl("ragged", "gpu") == "ragged"
    with pytest.raises(ValueError, match="'dense'"):
        resolve_impl("dense")
    assert padded_capacity(1000, 8, 2.0, tile=128) == 256  # 2 × 125 = 250, rounded up to the tile
    assert padded_capacity(100, 8, 2.0, tile=128) == 100  # never more slots than rows
