"""Causal block skipping (model/causal_attention.py): exact against the naive dense attention (values and gradients,
packed and not, several block counts, also in the planner's counting mode), refused with a recorded fallback where
block j ≤ i is not the visible set, and counted by the planner as n(n+1)/2 blocks, not n²."""

import contextlib
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn

from composer2_jax.model import Transformer, attention, kernel_paths, planning
from composer2_jax.model.attention_mask import AttentionMask
from composer2_jax.model.causal_attention import causal_skip_attention, triangle
from composer2_jax.model_config import get_model_config
from tests.tolerances import FP32_BLOCK, PLANNER_FLOP_COUNT_RTOL

SCALE = 0.3


pytestmark = pytest.mark.usefixtures("clean_kernel_paths")


def _qkv(t=32, b=2, h=3, kdim=8, vdim=6):
    keys = jax.random.split(jax.random.key(0), 3)
    return (jax.random.normal(keys[0], (b, t, h, kdim)), jax.random.normal(keys[1], (b, t, h, kdim)),
            jax.random.normal(keys[2], (b, t, h, vdim)))


def _packed(b=2, t=32):
    """Three documents per row with boundaries inside blocks (and a different split per row)."""
    seg = np.ones((b, t), np.int32)
    seg[0, 11:], seg[0, 25:] = 2, 3
    seg[1, 5:], seg[1, 18:] = 2, 3
    return jnp.asarray(seg)


def _loss(kernel, **kw):
    """A loss whose cotangent differs per output element (a plain sum would hide transposed gradients)."""
    w = jax.random.normal(jax.random.key(7), (2, 32, 3, 6))
    return lambda q, k, v: jnp.sum(w * kernel(q, k, v, scale=SCALE, **kw))


def test_triangle_visits_each_visible_block_once():
    i, j = triangle(4)
    assert list(zip(i.tolist(), j.tolist())) == [(0, 0), (1, 0), (1, 1), (2, 0), (2, 1), (2, 2), (3, 0), (3, 1),
                                                 (3, 2), (3, 3)]


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("chunk,counting", [(4, False), (8, False), (32, False), (8, True)])
def test_matches_dense_attention_values_and_gradients(packed, chunk, counting):
    q, k, v = _qkv()
    seg = _packed() if packed else None
    kw = dict(mask=AttentionMask.self_attention(seg))
    with planning.counting_loops() if counting else contextlib.nullcontext():
        skip = jax.jit(lambda q, k, v: causal_skip_attention(q, k, v, scale=SCALE, chunk=chunk, **kw))(q, k, v)
        g_skip = jax.jit(jax.grad(_loss(lambda *a, **k_: causal_skip_attention(*a, chunk=chunk, **k_), **kw),
                                  (0, 1, 2)))(q, k, v)
    ref = attention.xla_attention(q, k, v, scale=SCALE, **kw)
    g_ref = jax.grad(_loss(attention.xla_attention, **kw), (0, 1, 2))(q, k, v)
    np.testing.assert_allclose(np.asarray(skip), np.asarray(ref), **FP32_BLOCK)
    for a, b in zip(g_skip, g_ref):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), **FP32_BLOCK)
    assert kernel_paths.snapshot()["paths"]["attention"] == ["xla", "xla_causal_skip"]
    assert not kernel_paths.snapshot()["fallbacks"]


def test_bf16_inputs_give_bf16_outputs_and_gradients():
    q, k, v = _qkv()
    lo = tuple(x.astype(jnp.bfloat16) for x in (q, k, v))
    o = causal_skip_attention(*lo, scale=SCALE, chunk=8)
    g = jax.grad(lambda *a: jnp.sum(causal_skip_attention(*a, scale=SCALE, chunk=8).astype(jnp.float32)),
                 (0, 1, 2))(*lo)
    assert o.dtype == jnp.bfloat16 and all(x.dtype == jnp.bfloat16 for x in g)
    assert all(bool(jnp.all(jnp.isfinite(x))) for x in (o,) + g)


@pytest.mark.parametrize("case,kw,reason", [
    ("non-causal", dict(mask=AttentionMask(causal=False)), "not causal"),
    ("zigzag positions", dict(mask=AttentionMask(
        q_idx=jnp.broadcast_to(jnp.asarray([0, 1, 2, 3, 28, 29, 30, 31] * 4), (2, 32)),
        kv_idx=jnp.broadcast_to(jnp.asarray([0, 1, 2, 3, 28, 29, 30, 31] * 4), (2, 32)))),
     "explicit query/key positions"),
    ("chunk does not divide T", dict(chunk=12), "T = 32 is not a multiple of the chunk 12"),
])
def test_refused_layouts_fall_back_exactly_and_are_recorded(case, kw, reason):
    q, k, v = _qkv()
    kw = dict(kw)
    chunk = kw.pop("chunk", 8)
    out = causal_skip_attention(q, k, v, scale=SCALE, chunk=chunk, **kw)
    ref = attention.xla_attention(q, k, v, scale=SCALE, **kw)
    np.testing.assert_allclose(np.asarray(out), np.asarray(ref), **FP32_BLOCK)
    fallbacks = kernel_paths.snapshot()["fallbacks"]["attention"]
    assert any(f.startswith("xla_chunked: causal block skipping refused: " + reason) for f in fallbacks), fallbacks
    kernel_paths.set_strict(True)
    with pytest.raises(kernel_paths.KernelFallbackError, match="causal block skipping refused"):
        causal_skip_attention(q, k, v, scale=SCALE, chunk=chunk, **kw)


@pytest.mark.slow  # ~55 s on 2 cores: the kernel's exactness is the tests above; this is the selection by name
def test_model_with_causal_skip_kernel_matches_the_dense_kernel():
    """The kernel selected by name in a whole (toy) model: same loss and parameter gradients as 'xla'."""
    cfg = get_model_config("toy", num_layers=2, attention_kernel="xla")
    b, t = 2, 32
    tok = jax.random.randint(jax.random.key(1), (b, t), 0, cfg.vocab_size)
    seg = _packed(b, t)
    pos = jnp.asarray(np.concatenate([np.arange(t)[None]] * b))  # positions need not restart for this check
    variables = nn.unbox(Transformer(cfg).init(jax.random.key(0), tok))

    def loss(c, p):
        out = Transformer(c).apply(dict(variables, params=p), tok, pos, seg)
        return jnp.mean(jax.nn.log_softmax(out.logits.astype(jnp.float32))[..., 0])

    ref, g_ref = jax.jit(jax.value_and_grad(lambda p: loss(cfg, p)))(variables["params"])
    skip_cfg = dataclasses.replace(cfg, attention_kernel="xla_causal_skip")
    got, g = jax.jit(jax.value_and_grad(lambda p: loss(skip_cfg, p)))(variables["params"])
    np.testing.assert_allclose(float(got), float(ref), **FP32_BLOCK)
    for a, b_ in zip(jax.tree.leaves(g), jax.tree.leaves(g_ref)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b_), **FP32_BLOCK)
    assert "xla_causal_skip" in kernel_paths.snapshot()["paths"]["attention"]


def test_pair_masks_are_built_in_the_loop_not_stacked_for_it():
    """Under grad through a scan of layers (as in the model), no [pairs, …] bool array is kept: JAX's partial
    evaluation would otherwise build every pair's mask (which depends only on (i, j) and the segment ids) in a loop of
    its own, broadcast over the heads, and hold them all for the attention loop (34.9 GB per device for kimi_k2_5 at
    32k before the fix)."""
    import re

    t, chunk = 64, 16
    pairs = len(triangle(t // chunk)[0])
    x = _qkv(t=t, b=2, h=3, kdim=8, vdim=8)[0]
    seg = _packed(2, t)
    w = jax.random.normal(jax.random.key(3), (2, 8, 8))

    def loss(w):
        mask = AttentionMask(causal=True, q_segment_ids=seg, kv_segment_ids=seg)

        def layer(h, w_l):
            return causal_skip_attention(h @ w_l, h, h, scale=SCALE, mask=mask, chunk=chunk), None

        return jnp.sum(jax.lax.scan(layer, x, w)[0])

    hlo = jax.jit(jax.grad(loss)).lower(w).compile().as_text()
    stacked = sorted(set(re.findall(rf"pred\[{pairs},[\d,]+\]", hlo)))
    assert not stacked, f"pair masks stacked over the {pairs} pairs: {stacked}"


def _flops(fn, *args):
    ca = jax.jit(fn).lower(*args).compile().cost_analysis()
    return (ca[0] if isinstance(ca, (list, tuple)) else ca)["flops"]


def test_counting_mode_counts_the_triangle_of_blocks():
    """The planner's counting mode counts value-and-gradient of the skipping kernel as n(n+1)/2 block pairs: the
    FLOPs of an explicit Python loop over those pairs (each block forward and its FA-2 backward, from the same
    block kernel), where the scanned program counts one pair; and about (n + 1) / 2n of the masked chunked kernel."""
    from composer2_jax.model import kernels

    t, chunk, kdim, vdim = 128, 32, 64, 64  # head dims large enough that the einsums dominate, as at scale
    n = t // chunk
    q, k, v = _qkv(t, b=1, h=2, kdim=kdim, vdim=vdim)
    do = jax.random.normal(jax.random.key(5), v.shape)
    vg = lambda fn: jax.value_and_grad(lambda q, k, v: jnp.sum(do * fn(q, k, v)), (0, 1, 2))  # noqa: E731
    skip = lambda q, k, v: causal_skip_attention(q, k, v, scale=SCALE, chunk=chunk)  # noqa: E731

    def explicit(q, k, v):  # n(n+1)/2 pairs unrolled: forward of each, then each pair's backward
        rows = lambda x: [x[:, r * chunk:(r + 1) * chunk] for r in range(n)]  # noqa: E731
        q_, k_, v_, do_ = rows(q), rows(k), rows(v), rows(do)
        tri = jnp.tril(jnp.ones((chunk, chunk), bool))[None, None]
        out, grads = [], [jnp.zeros_like(x) for x in (q, k, v)]
        for i in range(n):
            parts = [kernels._masked_fwd(q_[i], k_[j], v_[j], SCALE, tri if i == j else None) for j in range(i + 1)]
            lse = jax.nn.logsumexp(jnp.stack([p[1] for p in parts]), axis=0)
            o = sum(jnp.exp(p[1] - lse)[..., None] * p[0] for p in parts)
            delta = jnp.sum(do_[i] * o, -1)
            for j in range(i + 1):
                dq, dk, dv = kernels._masked_bwd(q_[i], k_[j], v_[j], lse, do_[i], delta, SCALE,
                                                 tri if i == j else None)
                sl = lambda r: slice(r * chunk, (r + 1) * chunk)  # noqa: E731
                grads = [grads[0].at[:, sl(i)].add(dq), grads[1].at[:, sl(j)].add(dk), grads[2].at[:, sl(j)].add(dv)]
            out.append(o)
        return jnp.sum(do * jnp.concatenate(out, 1)), grads

    scanned = _flops(vg(skip), q, k, v)
    with planning.counting_loops():
        counted = _flops(vg(skip), q, k, v)
        masked = _flops(vg(lambda q, k, v: attention.chunked_attention(q, k, v, scale=SCALE, chunk=chunk)), q, k, v)
    want = _flops(explicit, q, k, v)
    np.testing.assert_allclose(counted, want, rtol=PLANNER_FLOP_COUNT_RTOL)
    assert scanned < want / 2  # the scan's body counted once: why counting mode exists
    # 10 of the 16 blocks (0.625), 7 block einsums per pair (FA-2) against 8 (rematerialised), a little more
    # elementwise work per pair (the merge, exp in both passes): measured 0.63 at these sizes
    assert counted < 0.7 * masked, (counted, masked)
