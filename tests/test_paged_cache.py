"""Paged latent cache: the paged trunk ≡ the contiguous cache on a ragged batch with scattered page tables, shared
prefix pages ≡ unshared, and the host pool's references, registry and LRU reclaim."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from composer2_jax.infer import kv_cache, paged_cache
from composer2_jax.model.attention import CacheStep, MLAttention
from composer2_jax.model.decoding import Decoder, Feed
from composer2_jax.model.layer_plan import layer_slots, layer_subtree
from composer2_jax.model.transformer import head_logits
from tests.test_infer import toy
from tests.tolerances import FP32_BLOCK

Y = 4  # slots per page


def _run(cfg, v, caches, tok, pos, write):
    tr = Decoder(cfg).trunk(v, caches, Feed(tok, pos, write))
    return tr, head_logits(tr.normed, v["params"]["lm_head"], cfg)


def test_paged_trunk_matches_contiguous_cache_with_scattered_pages():
    cfg, v = toy()
    r = np.random.default_rng(0)
    b, a_row, t = 3, 4, 5
    tok = jnp.asarray(r.integers(0, cfg.vocab_size, (b, 3 * t)), jnp.int32)
    lens = np.array([5, 9, 14])
    table = jnp.asarray(r.permutation(16)[:b * a_row].reshape(b, a_row), jnp.int32)  # pages scattered over the pool
    pools = paged_cache.init_pools(cfg, cfg.num_layers, 16, Y, jnp.float32)
    dense = kv_cache.init_cache(cfg, cfg.num_layers, b, a_row * Y, jnp.float32)
    run = jax.jit(lambda c, tk, ps, w: _run(cfg, v, c, tk, ps, w))
    for c0 in range(0, 3 * t, t):  # three chunks of 5: chunked prefill, each row stopping at its own length
        pos = jnp.broadcast_to(jnp.arange(c0, c0 + t), (b, t))
        write = pos < jnp.asarray(lens)[:, None]
        tr_p, logits_p = run(paged_cache.with_table(pools, table), tok[:, c0:c0 + t], pos, write)
        tr_d, logits_d = run(dense, tok[:, c0:c0 + t], pos, write)
        pools, dense = tuple(paged_cache.Pool(c.ckv, c.kr) for c in tr_p.caches), tr_d.caches
        for row in range(b):
            n = max(0, min(t, lens[row] - c0))
            np.testing.assert_allclose(np.asarray(logits_p[row, :n]), np.asarray(logits_d[row, :n]), **FP32_BLOCK)
    for pool, d in zip(pools, dense):  # every written position holds the same latent in its page
        got = paged_cache.PagedLayerCache(pool.ckv, pool.kr, table).keys()[0]
        for row in range(b):
            np.testing.assert_allclose(np.asarray(got[row, :lens[row]]), np.asarray(d.ckv[row, :lens[row]]),
                                       **FP32_BLOCK)


def test_shared_prefix_pages_match_unshared():
    """Two rows whose tables both point at the same two prefix pages (computed once) ≡ each computing its own."""
    cfg, v = toy()
    r = np.random.default_rng(1)
    prefix = r.integers(0, cfg.vocab_size, 2 * Y).tolist()
    tails = [r.integers(0, cfg.vocab_size, 3).tolist() for _ in range(2)]
    run = jax.jit(lambda c, tk, ps, w: _run(cfg, v, c, tk, ps, w))
    pools = paged_cache.init_pools(cfg, cfg.num_layers, 8, Y, jnp.float32)
    pos = jnp.arange(2 * Y)[None]
    tr, _ = run(paged_cache.with_table(pools, jnp.asarray([[0, 1, 7]])), jnp.asarray([prefix]), pos,
                jnp.ones((1, 2 * Y), bool))  # the prefix once, into pages 0 and 1
    pools = tuple(paged_cache.Pool(c.ckv, c.kr) for c in tr.caches)
    shared_table = jnp.asarray([[0, 1, 2], [0, 1, 3]])  # both rows reference pages 0, 1; private third pages
    pos_t = jnp.broadcast_to(jnp.arange(2 * Y, 2 * Y + 3), (2, 3))
    _, shared = run(paged_cache.with_table(pools, shared_table), jnp.asarray(tails), pos_t, jnp.ones((2, 3), bool))
    fresh = paged_cache.init_pools(cfg, cfg.num_layers, 8, Y, jnp.float32)
    _, alone = run(paged_cache.with_table(fresh, jnp.asarray([[0, 1, 2], [3, 4, 5]])),
                   jnp.asarray([prefix + t for t in tails]), jnp.broadcast_to(jnp.arange(2 * Y + 3), (2, 2 * Y + 3)),
                   jnp.ones((2, 2 * Y + 3), bool))
    np.testing.assert_allclose(np.asarray(shared), np.asarray(alone[:, 2 * Y:]), **FP32_BLOCK)


def test_page_pool_references_registry_and_lru_reclaim():
    pool = paged_cache.PagePool(3, Y)
    a, b, c = pool.alloc(), pool.alloc(), pool.alloc()
    assert (a, b, c) == (0, 1, 2) and pool.alloc() is None and pool.available == 0
    d0 = paged_cache.page_digest(b"", [1, 2, 3, 4], version=0)
    d1 = paged_cache.page_digest(d0, [5, 6, 7, 8], version=0)
    assert d0 != paged_cache.page_digest(b"", [1, 2, 3, 4], version=1)  # another weight version: another page
    pool.register(a, d0, meta="r0")
    pool.register(b, d1)
    pool.retain(a)  # a second session adopts page a
    pool.release(a)
    assert pool.lookup(d0) == a and pool.occupancy()["referenced"] == 3
    pool.release(a)
    pool.release(b)
    pool.release(c)  # unregistered: straight back to the free list
    occ = pool.occupancy()
    assert (occ["referenced"], occ["cached"], occ["free"]) == (0, 2, 1)
    pool.retain(b)  # adopting a cached page takes it out of the LRU
    assert pool.alloc() == c  # the free page first
    assert pool.alloc() == a and pool.lookup(d0) is None and pool.reclaimed == 1  # then the LRU cached page
    assert pool.lookup(d1) == b and pool.alloc() is None
    with pytest.raises(ValueError, match="no reference"):
        paged_cache.PagePool(2, Y).release(0)
    with pytest.raises(ValueError, match="num_pages"):
        paged_cache.PagePool(0, Y)


def test_live_attention_reads_only_pages_in_reach_and_matches_the_whole_table():
    """Attention of queries at positions in each width's reach (incl. the whole table) ≡ over every row's whole
    table, with junk latents in the pages past the queries (masked either way)."""
    cfg, v = toy()
    assert paged_cache.table_widths(32) == (8, 16, 32) and paged_cache.table_widths(5) == (5,)
    assert paged_cache.table_widths(947) == (30, 60, 119, 237, 474, 947)
    r = np.random.default_rng(2)
    b, a_row, t = 2, 32, 3
    pools = paged_cache.init_pools(cfg, 1, b * a_row, Y, jnp.float32)
    pool = paged_cache.Pool(*(jnp.asarray(r.normal(size=x.shape), jnp.float32) for x in pools[0]))  # junk everywhere
    table = jnp.asarray(r.permutation(b * a_row).reshape(b, a_row), jnp.int32)
    p = layer_subtree(v["params"], layer_slots(cfg, scanned=False)[0])["attn"]
    attention = lambda c, x, pos, w: MLAttention(cfg).apply({"params": p}, x, pos, cached=CacheStep(c, w))  # noqa
    x = jnp.asarray(r.normal(size=(b, t, cfg.hidden_size)), jnp.float32)
    for start in (0, 8 * Y - 2, 13 * Y, a_row * Y - t):  # the narrowest width, its edge, the middle one, the whole
        pos = jnp.broadcast_to(jnp.arange(start, start + t), (b, t))
        write = jnp.ones((b, t), bool)
        cache = paged_cache.PagedLayerCache(pool.ckv, pool.kr, table)
        got, _ = jax.jit(attention)(cache, x, pos, write)
        full, _ = attention(kv_cache.LayerCache(*cache.keys()), x, pos, write)  # every row's whole table, contiguous
        np.testing.assert_allclose(np.asarray(got), np.asarray(full), **FP32_BLOCK)
