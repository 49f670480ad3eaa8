"""The one mask description of every attention kernel (model/attention_mask.py) and the context-parallel options:
a mask crosses jit as an argument with `causal` static, kernels given one match a naive loop, and the calls that
cannot honour a mask field or an option refuse it by name."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from composer2_jax.model import context_parallel as cp
from composer2_jax.model.attention import chunked_attention, xla_attention
from composer2_jax.model.attention_mask import CAUSAL, AttentionMask
from composer2_jax.model.ring_attention import device_work, ring_attention
from composer2_jax.sharding import LOGICAL_RULES, Placement, make_mesh
from tests.tolerances import FP32_FN

B, T, H, K, V = 2, 8, 2, 4, 3
SCALE = 0.5


def _qkv():
    keys = jax.random.split(jax.random.key(3), 3)
    return (jax.random.normal(keys[0], (B, T, H, K)), jax.random.normal(keys[1], (B, T, H, K)),
            jax.random.normal(keys[2], (B, T, H, V)))


def _naive(q, k, v, causal, q_seg, kv_seg, q_idx, kv_idx):
    """Softmax attention one (b, h, t) row at a time in float64 numpy."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    out = np.zeros(q.shape[:3] + (v.shape[-1],))
    for b in range(q.shape[0]):
        for h in range(q.shape[2]):
            for t in range(q.shape[1]):
                seen = [s for s in range(k.shape[1]) if (not causal or kv_idx[b, s] <= q_idx[b, t])
                        and (q_seg is None or q_seg[b, t] == kv_seg[b, s])]
                logits = np.array([q[b, t, h] @ k[b, s, h] * SCALE for s in seen])
                p = np.exp(logits - logits.max())
                out[b, t, h] = (p / p.sum()) @ v[b, seen, h]
    return out


def test_mask_is_a_pytree_with_a_static_causal_flag():
    seg = jnp.asarray([[0, 0, 1, 1, 1, 2, 2, 2]] * B, jnp.int32)
    m = AttentionMask.self_attention(seg)
    assert m.causal and m.q_segment_ids is seg and m.kv_segment_ids is seg and not m.has_indices
    assert len(jax.tree.leaves(m)) == 2 and jax.tree.map(lambda a: a + 1, m).causal  # ids are leaves, causal is not
    traced = jax.jit(lambda m: jnp.sum(m.q_segment_ids) * (1 if m.causal else -1))  # `if` on a tracer would raise
    assert int(traced(m)) == int(seg.sum()) and int(traced(m.replace(causal=False))) == -int(seg.sum())
    assert CAUSAL.causal and CAUSAL.q_segment_ids is None and CAUSAL.replace(q_idx=seg).has_indices
    with pytest.raises(TypeError, match=r"causal must be a Python bool .* got 'yes' of type str"):
        AttentionMask(causal="yes")


@pytest.mark.parametrize("causal,packed,positions", [(True, False, False), (True, True, False), (False, True, False),
                                                     (True, True, True)])
def test_kernels_given_a_mask_as_a_jit_argument_match_a_naive_loop(causal, packed, positions):
    q, k, v = _qkv()
    seg = jnp.asarray(np.repeat([[1, 1, 1, 2, 2, 3, 3, 3]], B, 0), jnp.int32) if packed else None
    idx = jnp.asarray(np.stack([np.random.default_rng(b).permutation(T) for b in range(B)]), jnp.int32)
    mask = AttentionMask(causal, seg, seg, idx if positions else None, idx if positions else None)
    nat = np.broadcast_to(np.arange(T), (B, T))
    want = _naive(q, k, v, causal, None if seg is None else np.asarray(seg), None if seg is None else np.asarray(seg),
                  np.asarray(idx) if positions else nat, np.asarray(idx) if positions else nat)
    dense = jax.jit(lambda q, k, v, m: xla_attention(q, k, v, scale=SCALE, mask=m))(q, k, v, mask)
    chunked = jax.jit(lambda q, k, v, m: chunked_attention(q, k, v, scale=SCALE, mask=m, chunk=4))(q, k, v, mask)
    for got in (dense, chunked):
        np.testing.assert_allclose(np.asarray(got), want, **FP32_FN)


def test_context_options_and_the_refusals_of_the_context_parallel_calls():
    mesh = make_mesh(dict(context=2), devices=jax.devices()[:2])
    assert cp.ContextOptions.on(mesh, "contiguous") == cp.ContextOptions(Placement(mesh, LOGICAL_RULES), "contiguous")
    assert cp.ContextOptions.on(None).placement == Placement()
    with pytest.raises(TypeError, match="expected a Placement, a jax.sharding.Mesh or None, got str"):
        cp.ContextOptions.on("context")
    q, k, v = _qkv()
    idx = jnp.broadcast_to(jnp.arange(T), (B, T))
    with pytest.raises(ValueError, match="q_idx/kv_idx must be None"):
        ring_attention(q, k, q, mask=AttentionMask(q_idx=idx, kv_idx=idx))
    with pytest.raises(ValueError, match="needs a mesh with a `context` axis"):
        cp.allgather_attention(q, (k, v), scale=SCALE)
    with pytest.raises(ValueError, match="device i=2 of n=2 KV blocks"):
        device_work(2, q, jnp.stack([k, k]), jnp.stack([v, v]), v)
    with pytest.raises(ValueError, match="no segment ids or positions"):
        device_work(0, q, jnp.stack([k, k]), jnp.stack([v, v]), v, mask=AttentionMask.self_attention(idx))


@pytest.mark.parametrize("layout", ["zigzag", "contiguous"])
def test_device_work_is_one_device_of_the_ring(layout):
    """device_work(i, ...) given the KV blocks device i receives (step s: block (i − s) mod n) ≡ rows of device i
    of dense causal attention, and its gradients ≡ those of dense attention with a cotangent on those rows only."""
    n, t = 4, 32
    tl = t // n
    q, k, v = (jax.random.normal(jax.random.key(s), (1, t, H, d)) for s, d in ((0, K), (1, K), (2, V)))
    do = jax.random.normal(jax.random.key(3), (1, t, H, V))
    to = (lambda a: cp.zigzag(a, n)) if layout == "zigzag" else (lambda a: a)
    back = (lambda a: cp.unzigzag(a, n)) if layout == "zigzag" else (lambda a: a)
    rows = lambda a, j: to(a)[:, j * tl:(j + 1) * tl]  # noqa: E731  device j's rows in the layout
    options = cp.ContextOptions(layout=layout, block_kernel="xla")
    for i in range(n):
        received = [(i - s) % n for s in range(n)]
        out, dq, dk_n, dv_n = device_work(i, rows(q, i), jnp.stack([rows(k, j) for j in received]),
                                          jnp.stack([rows(v, j) for j in received]), rows(do, i), scale=SCALE,
                                          options=options)
        only_i = back(jnp.zeros_like(do).at[:, i * tl:(i + 1) * tl].set(rows(do, i)))  # natural order
        dense = lambda q, k, v: xla_attention(q, k, v, scale=SCALE)  # noqa: E731
        want_out = rows(dense(q, k, v), i)
        gq, gk, gv = jax.grad(lambda *a: jnp.sum(dense(*a) * only_i), (0, 1, 2))(q, k, v)
        np.testing.assert_allclose(np.asarray(out), np.asarray(want_out), **FP32_FN)
        np.testing.assert_allclose(np.asarray(dq), np.asarray(rows(gq, i)), **FP32_FN)
        for s, j in enumerate(received):
            np.testing.assert_allclose(np.asarray(dk_n[s]), np.asarray(rows(gk, j)), **FP32_FN)
            np.testing.assert_allclose(np.asarray(dv_n[s]), np.asarray(rows(gv, j)), **FP32_FN)
