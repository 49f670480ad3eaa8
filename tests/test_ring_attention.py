"""Ring attention ≡ dense attention (forward and gradients) on 8 fake CPU devices with context 2, 4 and 8:
causal and non-causal, packed segments, zigzag and contiguous layouts, expanded and MLA-latent passing, all-gather
mode; the block-kernel LSE contract; per-device memory falling with the context axis."""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from composer2_jax.model import context_parallel as cp
from composer2_jax.model import kernels
from composer2_jax.model.attention import xla_attention
from composer2_jax.model.attention_mask import AttentionMask
from composer2_jax.model.context_parallel import ContextOptions
from composer2_jax.model.ring_attention import ring_attention, ring_mla_attention
from composer2_jax.sharding import Placement, make_mesh
from tests.tolerances import PLANNER_FLOP_COUNT_RTOL, SHARDED_FP32

B, T, H, N, R, L, V = 2, 32, 2, 8, 4, 6, 4  # K = N + R
SCALE = 0.3


def _mesh(context, **other):
    """A mesh on the first context·others devices; axes not named are 1."""
    size = context * int(np.prod(list(other.values()) or [1]))
    return make_mesh(dict(context=context, **other), devices=jax.devices()[:size])


def _segments(packed: bool, seed: int = 0):
    """Sorted packing ids [B, T] with a few documents per row (None when not packed)."""
    if not packed:
        return None
    ids = np.sort(np.random.default_rng(seed).integers(0, 4, (B, T)), axis=1)
    return jnp.asarray(ids, jnp.int32)


def _normal(key, shape, scale=1.0):
    return scale * jax.random.normal(jax.random.key(key), shape, jnp.float32)


def _value_and_vjp(fn, args, ct):
    """jit(fn) output and its VJP with cotangent ct, in one compile."""

    def both(*a):
        out, vjp = jax.vjp(fn, *a)
        return out, vjp(ct)

    return jax.jit(both)(*args)


def _assert_close(got, ref):
    for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), **SHARDED_FP32)


def _layout(n, layout):
    """(to layout, back to natural order) along T."""
    if layout == "zigzag":
        return (lambda a: cp.zigzag(a, n)), (lambda a: cp.unzigzag(a, n))
    return (lambda a: a), (lambda a: a)


# ----------------------------------------------------------------------------------------------- layout


def test_zigzag_layout_roundtrip_and_shard_chunks():
    n, t = 4, 16
    x = jnp.arange(2 * t).reshape(2, t)
    z = cp.zigzag(x, n)
    c = t // (2 * n)
    for i in range(n):  # shard i holds chunks i and 2n-1-i
        shard = np.asarray(z[0, i * 2 * c:(i + 1) * 2 * c])
        expected = np.concatenate([np.arange(i * c, (i + 1) * c), np.arange((2 * n - 1 - i) * c, (2 * n - i) * c)])
        np.testing.assert_array_equal(shard, expected)
        np.testing.assert_array_equal(np.asarray(cp.shard_token_index(i, 2 * c, n)), expected)
    np.testing.assert_array_equal(np.asarray(cp.unzigzag(z, n)), np.asarray(x))
    y = jnp.arange(t * 3).reshape(t, 3)
    np.testing.assert_array_equal(np.asarray(cp.unzigzag(cp.zigzag(y, n, axis=0), n, axis=0)), np.asarray(y))
    batch = cp.zigzag_batch({"tokens": x, "positions": x + 1}, n)
    np.testing.assert_array_equal(np.asarray(batch["positions"]), np.asarray(z + 1))


def test_length_not_divisible_by_two_context_names_the_values():
    with pytest.raises(ValueError, match=r"T=20 is not divisible by 2×context=8"):
        cp.zigzag(jnp.zeros((1, 20)), 4)
    q = jnp.zeros((B, 24, H, N + R))
    with pytest.raises(ValueError, match=r"T=24 is not divisible by 2×context=16"):
        ring_attention(q, q, q, options=ContextOptions.on(_mesh(8)))


def test_bad_calls_are_refused():
    mesh = _mesh(2)
    q = jnp.zeros((B, T, H, N + R))
    with pytest.raises(ValueError, match="q_segment_ids and kv_segment_ids together"):
        ring_attention(q, q, q, mask=AttentionMask(q_segment_ids=jnp.zeros((B, T), jnp.int32)),
                       options=ContextOptions.on(mesh))
    with pytest.raises(ValueError, match="self-attention"):
        ring_attention(q, q[:, :16], q[:, :16], options=ContextOptions.on(mesh))
    from composer2_jax.model.ring_attention import ring_kernel

    with jax.set_mesh(mesh), pytest.raises(ValueError, match="q_idx/kv_idx must be None"):
        ring_kernel(q, q, q, scale=1.0, mask=AttentionMask(q_idx=jnp.zeros((B, T), jnp.int32),
                                                           kv_idx=jnp.zeros((B, T), jnp.int32)),
                    placement=Placement(mesh))


def test_zigzag_balances_the_analytic_block_work():
    for n in (2, 4, 8, 16):
        zz = cp.device_block_pairs(n, "zigzag")
        assert max(zz) == min(zz) == 0.5 * n  # every device: a causal diagonal + n−1 half blocks
        cont = cp.device_block_pairs(n, "contiguous")
        assert sum(cont) == pytest.approx(sum(zz)) and max(cont) / np.mean(cont) == pytest.approx(2 - 1 / n)


# ----------------------------------------------------------------------------------------------- block kernels


def test_block_results_merge_through_their_lse_and_block_grads_sum_to_the_exact_grad():
    """Two key halves merged by lse ≡ one block; FA-2 block backward with the global (o, lse) ≡ autodiff."""
    q, k, v = _normal(0, (B, T, H, N + R)), _normal(1, (B, T, H, N + R)), _normal(2, (B, T, H, V))
    seg = _segments(True)
    o, lse = kernels.xla_fwd(q, k, v, SCALE, True, seg, seg)
    np.testing.assert_allclose(np.asarray(o), np.asarray(xla_attention(q, k, v, scale=SCALE,
                                                                       mask=AttentionMask.self_attention(seg))),
                               **SHARDED_FP32)
    h = T // 2  # keys [0, h) are fully visible to queries [h, T): a full block beside a diagonal one
    o1, l1 = kernels.xla_fwd(q[:, h:], k[:, :h], v[:, :h], SCALE, False, seg[:, h:], seg[:, :h])
    o2, l2 = kernels.xla_fwd(q[:, h:], k[:, h:], v[:, h:], SCALE, True, seg[:, h:], seg[:, h:])
    lse_m = jnp.logaddexp(l1, l2)
    o_m = o1 * jnp.exp(l1 - lse_m)[..., None] + o2 * jnp.exp(l2 - lse_m)[..., None]
    _assert_close((o_m, lse_m), (o[:, h:], lse[:, h:]))
    do = _normal(3, o.shape)
    ref = jax.grad(lambda *a: jnp.sum(xla_attention(*a, scale=SCALE, mask=AttentionMask.self_attention(seg)) * do),
                   argnums=(0, 1, 2))(q, k, v)
    delta = jnp.sum(do * o, -1)
    dq, dk, dv = kernels.xla_bwd(q, k, v, kernels.BlockGrad(o, lse, do, delta), SCALE, True, seg, seg)
    _assert_close((dq, dk, dv), ref)


@pytest.mark.parametrize("causal,packed", [(True, True), (True, False), (False, True)])
def test_chunked_block_kernel_equals_the_plain_one_forward_and_backward(monkeypatch, causal, packed):
    """The query-chunked XLA block kernel (the planner's stand-in for a fused kernel) ≡ the plain one, scanned
    and in the planner's one-piece counting mode (planning.counting_loops)."""
    from composer2_jax.model import planning

    monkeypatch.setattr(kernels, "CHUNK", 8)
    t = 32  # four query chunks
    q, k, v = _normal(0, (B, t, H, N + R)), _normal(1, (B, t, H, N + R)), _normal(2, (B, t, H, V))
    r = np.random.default_rng(0)
    seg = jnp.asarray(np.sort(r.integers(0, 3, (B, t)), axis=1).astype(np.int32)) if packed else None
    o, lse = kernels.xla_fwd(q, k, v, SCALE, causal, seg, seg)
    do = _normal(3, o.shape)
    delta = jnp.sum(do * o, -1)
    want = (o, lse) + kernels.xla_bwd(q, k, v, kernels.BlockGrad(o, lse, do, delta), SCALE, causal, seg, seg)
    for mode in (contextlib.nullcontext(), planning.counting_loops()):
        with mode:
            got_o, got_lse = kernels.chunked_fwd(q, k, v, SCALE, causal, seg, seg)
            got = (got_o, got_lse) + kernels.chunked_bwd(q, k, v, kernels.BlockGrad(o, lse, do, delta), SCALE, causal,
                                                                     seg, seg)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), **SHARDED_FP32)
    with planning.accelerator_kernels():
        assert kernels.get_block_kernel("auto").name == "xla_chunked"
    assert kernels.get_block_kernel("auto").name == "xla"


# ----------------------------------------------------------------------------------------------- ring ≡ dense

CASES = [  # (context, causal, layout, packed, other mesh axes)
    (2, True, "zigzag", True, {}),
    (4, True, "zigzag", False, {}),
    (8, True, "zigzag", True, {}),
    (4, False, "zigzag", True, {}),
    (4, True, "contiguous", True, {}),
    (2, True, "zigzag", True, dict(fsdp=2, tensor=2)),  # batch and heads sharded too
]


def _check_ring_against_dense(n, causal, layout, packed, other, block_kernel):
    q, k, v = _normal(0, (B, T, H, N + R)), _normal(1, (B, T, H, N + R)), _normal(2, (B, T, H, V))
    ct = _normal(3, (B, T, H, V))
    seg = _segments(packed)
    mesh = _mesh(n, **other)
    to, back = _layout(n, layout)

    def dense(q, k, v):
        return xla_attention(q, k, v, scale=SCALE, mask=AttentionMask.self_attention(seg, causal))

    def ring(q, k, v):
        s = None if seg is None else to(seg)
        return back(ring_attention(to(q), to(k), to(v), scale=SCALE, mask=AttentionMask.self_attention(s, causal),
                                   options=ContextOptions.on(mesh, layout, block_kernel)))

    _assert_close(_value_and_vjp(ring, (q, k, v), ct), _value_and_vjp(dense, (q, k, v), ct))


@pytest.mark.parametrize("n,causal,layout,packed,other", CASES)
def test_ring_matches_dense_forward_and_gradients(n, causal, layout, packed, other):
    _check_ring_against_dense(n, causal, layout, packed, other, "xla")


@pytest.mark.parametrize("n,causal,layout,packed,other", [CASES[0], CASES[3], CASES[5]])
def test_ring_with_the_chunked_block_kernel_matches_dense(monkeypatch, n, causal, layout, packed, other):
    """The planner's block kernel inside the ring's shard_map (scan carries must keep their varying axes)."""
    monkeypatch.setattr(kernels, "CHUNK", T // (4 * n))  # every block of T/(2n) rows is two chunks
    _check_ring_against_dense(n, causal, layout, packed, other, "xla_chunked")


def test_ring_without_mesh_is_one_local_block():
    q, k, v = _normal(0, (B, T, H, N + R)), _normal(1, (B, T, H, N + R)), _normal(2, (B, T, H, V))
    ct = _normal(3, (B, T, H, V))
    seg = _segments(True)
    ring = lambda *a: ring_attention(*a, scale=SCALE, mask=AttentionMask.self_attention(seg))  # noqa: E731
    dense = lambda *a: xla_attention(*a, scale=SCALE, mask=AttentionMask.self_attention(seg))  # noqa: E731
    _assert_close(_value_and_vjp(ring, (q, k, v), ct), _value_and_vjp(dense, (q, k, v), ct))


def _latent_inputs():
    q = _normal(0, (B, T, H, N + R))
    ckv, kr = _normal(1, (B, T, L)), _normal(2, (B, T, R))
    w = _normal(4, (L, H, N + V), 0.3)
    return q, ckv, kr, w


def _dense_latent(causal, seg):
    def dense(q, ckv, kr, w):
        k, v = cp.expand_latent(ckv, kr, w, N)
        return xla_attention(q, k, v, scale=SCALE, mask=AttentionMask.self_attention(seg, causal))

    return dense


@pytest.mark.parametrize("n,causal,other", [(8, True, {}), (2, True, dict(fsdp=2, tensor=2)), (4, False, {})])
def test_ring_latent_matches_dense_forward_and_gradients(n, causal, other):
    """Latent passing: gradients reach q, c_kv, k_R and W_kvb (heads split over `tensor` in one case)."""
    args = _latent_inputs()
    ct = _normal(3, (B, T, H, V))
    seg = _segments(True, seed=1)
    mesh = _mesh(n, **other)
    to, back = _layout(n, "zigzag")

    def ring(q, ckv, kr, w):
        return back(ring_mla_attention(to(q), to(ckv), to(kr), w, scale=SCALE,
                                       mask=AttentionMask.self_attention(to(seg), causal),
                                       options=ContextOptions.on(mesh, block_kernel="xla")))

    _assert_close(_value_and_vjp(ring, args, ct), _value_and_vjp(_dense_latent(causal, seg), args, ct))


# ----------------------------------------------------------------------------------------------- all-gather CP


def test_allgather_expanded_matches_dense():
    n = 4
    q, k, v = _normal(0, (B, T, H, N + R)), _normal(1, (B, T, H, N + R)), _normal(2, (B, T, H, V))
    ct = _normal(3, (B, T, H, V))
    seg = _segments(True)
    mesh = _mesh(n)
    to, back = _layout(n, "zigzag")

    def ag(q, k, v):
        return back(cp.allgather_attention(to(q), (to(k), to(v)), scale=SCALE,
                                           mask=AttentionMask.self_attention(to(seg)), options=ContextOptions.on(mesh)))

    dense = lambda *a: xla_attention(*a, scale=SCALE, mask=AttentionMask.self_attention(seg))  # noqa: E731
    _assert_close(_value_and_vjp(ag, (q, k, v), ct), _value_and_vjp(dense, (q, k, v), ct))


def test_allgather_latent_matches_dense():
    n = 8
    args = _latent_inputs()
    ct = _normal(3, (B, T, H, V))
    seg = _segments(True, seed=2)
    mesh = _mesh(n)
    to, back = _layout(n, "zigzag")

    def ag(q, ckv, kr, w):
        return back(cp.allgather_attention(to(q), (to(ckv), to(kr)), w, scale=SCALE,
                                           mask=AttentionMask.self_attention(to(seg)), options=ContextOptions.on(mesh)))

    _assert_close(_value_and_vjp(ag, args, ct), _value_and_vjp(_dense_latent(True, seg), args, ct))


# ----------------------------------------------------------------------------------------------- memory


def _temp_bytes(n: int, t: int, allgather: bool = False) -> int:
    """Per-device temporary bytes of a compiled fwd+bwd at global length t over context n."""
    mesh = _mesh(n)
    sds = jax.ShapeDtypeStruct((1, t, 2, 16), jnp.float32)

    def loss(q, k, v):
        o = cp.allgather_attention(q, (k, v), scale=SCALE, options=ContextOptions.on(mesh)) if allgather else \
            ring_attention(q, k, v, scale=SCALE, options=ContextOptions.on(mesh, block_kernel="xla"))
        return jnp.sum(o * o)

    compiled = jax.jit(jax.grad(loss, argnums=(0, 1, 2))).lower(sds, sds, sds).compile()
    return compiled.memory_analysis().temp_size_in_bytes


def test_per_device_temporary_memory_falls_with_the_context_axis():
    """At fixed global T, ring temporaries fall at least as 1/n (block logits [T/n, T/2n]: ~1/n²)."""
    t = 1024
    ring = {n: _temp_bytes(n, t) for n in (2, 4, 8)}
    for n in (2, 4):
        assert ring[2 * n] <= 0.55 * ring[n], ring
    assert ring[8] < _temp_bytes(8, t, allgather=True) / 2  # all-gather keeps O(T·T/n) logits per device


def test_counting_mode_attention_counts_every_query_chunk():
    """The planner's counting mode takes the query chunks of `chunked_attention` as one piece: XLA's cost analysis
    of value-and-gradient then counts the FLOPs of all chunks, i.e. those of an explicit Python loop over the
    chunks (independent reference: n rematerialised `xla_attention` calls); the scanned program counts one."""
    from composer2_jax.model import attention, planning

    t, chunk, kdim, vdim = 128, 32, 64, 64  # head dims large enough that the einsums dominate, as at scale
    q, k, v = _normal(0, (B, t, H, kdim)), _normal(1, (B, t, H, kdim)), _normal(2, (B, t, H, vdim))
    idx = jnp.broadcast_to(jnp.arange(t), (B, t))

    def looped(q, k, v):
        one = jax.checkpoint(lambda q_, qi_: xla_attention(q_, k, v, scale=SCALE,
                                                            mask=AttentionMask(q_idx=qi_, kv_idx=idx)))
        return jnp.concatenate([one(q[:, i:i + chunk], idx[:, i:i + chunk]) for i in range(0, t, chunk)], 1)

    def flops(fn):
        loss = lambda q, k, v: jnp.sum(fn(q, k, v) ** 2)  # noqa: E731
        ca = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2))).lower(q, k, v).compile().cost_analysis()
        return (ca[0] if isinstance(ca, (list, tuple)) else ca)["flops"]

    chunked = lambda q, k, v: attention.chunked_attention(q, k, v, scale=SCALE, chunk=chunk)  # noqa: E731
    scanned = flops(chunked)
    with planning.counting_loops():
        counted = flops(chunked)
    want = flops(looped)
    np.testing.assert_allclose(counted, want, rtol=PLANNER_FLOP_COUNT_RTOL)
    assert scanned < want / 2  # the scan's body counted once: why counting mode exists
