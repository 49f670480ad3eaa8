"""The paged MLA latent cache: fixed-size pages from one pool, page tables per row, shared prefix pages, LRU reuse.

Device side (`PagedLayerCache`): per attention layer a pool c_kv [A, Y, L] and k_R [A, Y, R] of A pages of Y slots;
page a holds the same Y positions of the same sequence in every layer, so one page table serves all layers. Row b's
position s lives in page table[b, s // Y] at offset s % Y. `write` scatters new latents there (entries marked
invalid are dropped); `keys` gathers a row's pages into the contiguous view [B, S = A_row·Y, L] with slot =
position, which is exactly what `kv_cache.LayerCache.keys` returns, so the model's attention (model/attention.py
`CacheStep`) reads either cache unchanged and masks keys by position (slots past a row's length are never visible);
`attend` reads only the pages the step's queries reach (`live_attention`).

Host side (`PagePool`), the vLLM PagedAttention block manager with SGLang-style prefix reuse:
  1. pages are handed out from a free list; every holder (a session's page table) takes a reference
  2. a page whose Y positions are all computed is *full*: it is registered under the digest of its whole prefix
     (the previous page's digest, its own Y tokens and the weight version that computed it) and never written again
  3. a session whose tokens start with registered pages adopts them (reference + 1) instead of computing them, so a
     system prompt or a task statement shared by a group is stored once; only full pages are shared, so no page is
     ever written by two rows (no copy-on-write needed)
  4. a registered page whose last reference goes stays cached (it may be adopted again, e.g. after a summary restart
     or a preemption); when the free list is empty the least recently released cached page is reclaimed
Occupancy (pages free / referenced / cached) and bytes per token are reported by `PagePool.occupancy` and
`bytes_per_token`.
"""

from __future__ import annotations

import collections
import hashlib
from typing import NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from composer2_jax.model_config import ModelConfig


class PagedLayerCache(NamedTuple):
    """One attention layer's paged cache: the layer's pool and the step's page tables (shared by all layers)."""

    ckv: jax.Array  # [A, Y, L] normed compressed latents, A pages of Y slots
    kr: jax.Array  # [A, Y, R] roped shared rotary keys
    table: jax.Array  # [B, A_row] int32 page ids of each row; position s is at page table[b, s // Y], offset s % Y

    def write(self, ckv_BTL, kr_BTR, pos_BT, write_BT, placement=None) -> "PagedLayerCache":
        """Scatter the new latents to (page, offset) of their positions; write=False or out-of-table are dropped.
        `placement` (LayerCache's interface) is not used: pages belong to no batch row, so there is no row layout."""
        del placement
        a, y = self.ckv.shape[:2]
        a_row = self.table.shape[1]
        ok_BT = write_BT & (pos_BT >= 0) & (pos_BT < a_row * y)
        page_BT = jnp.take_along_axis(self.table, jnp.clip(pos_BT // y, 0, a_row - 1), axis=1)
        page_BT = jnp.where(ok_BT, page_BT, a)  # page a is out of range: the entry is dropped
        off_BT = pos_BT % y
        ckv = self.ckv.at[page_BT, off_BT].set(ckv_BTL.astype(self.ckv.dtype), mode="drop")
        kr = self.kr.at[page_BT, off_BT].set(kr_BTR.astype(self.kr.dtype), mode="drop")
        return PagedLayerCache(ckv, kr, self.table)

    def narrow(self, pages: int) -> "PagedLayerCache":
        """The same pool under the first `pages` entries of each page table (positions < pages·Y)."""
        return self._replace(table=self.table[:, :pages])

    def keys(self):
        """(c_kv [B, A_row·Y, L], k_R [B, A_row·Y, R]): each row's pages in order, slot = position."""
        b, a_row = self.table.shape
        y = self.ckv.shape[1]
        ckv_BAYL, kr_BAYR = self.ckv[self.table], self.kr[self.table]
        return ckv_BAYL.reshape(b, a_row * y, -1), kr_BAYR.reshape(b, a_row * y, -1)

    def attend(self, fn, q_pos_BT):
        """fn(c_kv, k_R) over the narrowest page-table prefix that covers the farthest query (`live_attention`)."""
        return live_attention(lambda c: fn(*c.keys()), self, q_pos_BT)


def table_widths(table_pages: int, branches: int = 6, smallest: int = 8) -> tuple[int, ...]:
    """Ascending page-table widths attention may read (`live_attention`): the full table, then halvings, at most
    `branches` of them and none below `smallest` pages."""
    widths = [table_pages]
    while len(widths) < branches and -(-widths[-1] // 2) >= smallest:
        widths.append(-(-widths[-1] // 2))
    return tuple(reversed(widths))


def live_attention(attend, cache: PagedLayerCache, q_pos_BT):
    """`attend(cache)` reading only the pages the step's queries can see: the narrowest of `table_widths` that covers
    the largest query position, picked at run time (`lax.switch`: one compiled program, every width in it). A key
    slot past a query's position is masked whatever the width, so the result is the full table's (up to the order
    of the softmax sums); a decode step of short contexts no longer gathers and scores every row's whole table."""
    a_row, y = cache.table.shape[1], cache.ckv.shape[1]
    widths = table_widths(a_row)
    if len(widths) == 1:
        return attend(cache)
    need = jnp.max(q_pos_BT) // y + 1  # pages holding the slots the farthest query sees
    idx = jnp.minimum(jnp.searchsorted(jnp.asarray(widths, jnp.int32), need), len(widths) - 1)
    return jax.lax.switch(idx, [lambda c, w=w: attend(c.narrow(w)) for w in widths], cache)


class Pool(NamedTuple):
    """One attention layer's page pool (what the engine keeps between steps)."""

    ckv: jax.Array  # [A, Y, L]
    kr: jax.Array  # [A, Y, R]


def init_pools(cfg: ModelConfig, n_layers: int, num_pages: int, page_size: int, dtype) -> tuple[Pool, ...]:
    """Zero pools for `n_layers` attention layers."""
    return tuple(Pool(jnp.zeros((num_pages, page_size, cfg.kv_lora_rank), dtype),
                      jnp.zeros((num_pages, page_size, cfg.qk_rope_head_dim), dtype)) for _ in range(n_layers))


def with_table(pools: Sequence[Pool], table_BA) -> tuple[PagedLayerCache, ...]:
    """The per-layer caches a forward pass reads and writes: every layer's pool under the same page tables."""
    return tuple(PagedLayerCache(p.ckv, p.kr, table_BA) for p in pools)


def gather_rows(pool_AYX, table_BA, pos_BT):
    """pool[table[b, s // Y], s % Y] for each row's positions [B, T] (positions are clipped into the table)."""
    y = pool_AYX.shape[1]
    a_row = table_BA.shape[1]
    pos_BT = jnp.clip(pos_BT, 0, a_row * y - 1)
    return pool_AYX[jnp.take_along_axis(table_BA, pos_BT // y, axis=1), pos_BT % y]


def scatter_rows(pool_AYX, table_BA, pos_BT, write_BT, x_BTX):
    """The pool with x written at each row's positions (write=False or out of the table: dropped)."""
    a, y = pool_AYX.shape[:2]
    a_row = table_BA.shape[1]
    ok_BT = write_BT & (pos_BT >= 0) & (pos_BT < a_row * y)
    page_BT = jnp.take_along_axis(table_BA, jnp.clip(pos_BT // y, 0, a_row - 1), axis=1)
    return pool_AYX.at[jnp.where(ok_BT, page_BT, a), pos_BT % y].set(x_BTX.astype(pool_AYX.dtype), mode="drop")


class DraftPools(NamedTuple):
    """What MTP drafting keeps beside the trunk's pools, under the same page tables (infer/step.py)."""

    mtp: tuple  # Pool per drafting MTP depth: the depth's block latents
    hidden: jax.Array  # [A, Y, D] the trunk's h_0 (last hidden state before the final norm) of every position


def init_draft_pools(cfg: ModelConfig, num_draft: int, num_pages: int, page_size: int, dtype) -> DraftPools:
    """Zero pools for `num_draft` MTP depths and the h_0 pool."""
    return DraftPools(init_pools(cfg, num_draft, num_pages, page_size, dtype),
                      jnp.zeros((num_pages, page_size, cfg.hidden_size), dtype))


def bytes_per_token(cfg: ModelConfig, n_layers: int, dtype_bytes: int = 2) -> int:
    """Latent cache bytes per token: (L + R) values per attention layer."""
    return n_layers * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * dtype_bytes


def page_digest(parent: bytes, tokens: Sequence[int], version: int) -> bytes:
    """The registry key of a full page: its whole prefix (parent digest + its tokens) and the weight version."""
    h = hashlib.blake2b(parent, digest_size=16)
    h.update(np.asarray(tokens, np.int64).tobytes())
    h.update(int(version).to_bytes(8, "little", signed=True))
    return h.digest()


class PagePool:
    """Host bookkeeping of one page pool: free list, reference counts, the registry of full pages, LRU reclaim."""

    def __init__(self, num_pages: int, page_size: int):
        if num_pages < 1 or page_size < 1:
            raise ValueError(f"a page pool needs num_pages ≥ 1 and page_size ≥ 1, got {num_pages}, {page_size}")
        self.num_pages, self.page_size = num_pages, page_size
        self._free = collections.deque(range(num_pages))
        self.refs = np.zeros((num_pages,), np.int64)
        self._digest_of: dict[int, bytes] = {}
        self._registry: dict[bytes, int] = {}
        self._cached: collections.OrderedDict[int, None] = collections.OrderedDict()  # ref 0, registered; LRU first
        self.meta: dict[int, object] = {}  # page → what the engine stores with a registered page (its routing)
        self.reclaimed = 0  # cached pages reclaimed for new data

    def alloc(self) -> Optional[int]:
        """A page for new data (reference 1): a free one, else the least recently released cached one; None if
        every page is referenced."""
        if self._free:
            page = self._free.popleft()
        elif self._cached:
            page, _ = self._cached.popitem(last=False)
            self._unregister(page)
            self.reclaimed += 1
        else:
            return None
        self.refs[page] = 1
        return page

    def retain(self, page: int) -> None:
        """One more holder of a page (adopting a registered page)."""
        if self.refs[page] == 0:
            self._cached.pop(page)
        self.refs[page] += 1

    def release(self, page: int) -> None:
        """A holder lets go; at zero references a registered page stays cached, any other is free."""
        if self.refs[page] <= 0:
            raise ValueError(f"page {page} released with no reference held")
        self.refs[page] -= 1
        if self.refs[page] == 0:
            if page in self._digest_of:
                self._cached[page] = None
            else:
                self._free.append(page)

    def register(self, page: int, digest: bytes, meta: object = None) -> None:
        """Record a full page under its digest (a digest already held by another page keeps that one)."""
        if digest not in self._registry and page not in self._digest_of:
            self._registry[digest], self._digest_of[page] = page, digest
            self.meta[page] = meta

    def lookup(self, digest: bytes) -> Optional[int]:
        """The registered page of a digest, or None."""
        return self._registry.get(digest)

    def drop_registry(self) -> None:
        """Forget every registered page (new weights under the recompute policy): cached ones become free."""
        for page in list(self._digest_of):
            self._unregister(page)
        while self._cached:
            self._free.append(self._cached.popitem(last=False)[0])

    def _unregister(self, page: int) -> None:
        digest = self._digest_of.pop(page)
        del self._registry[digest]
        self.meta.pop(page, None)

    @property
    def available(self) -> int:
        """Pages `alloc` can hand out now (free + cached)."""
        return len(self._free) + len(self._cached)

    def occupancy(self) -> dict:
        """Pages referenced / cached (registered, unreferenced) / free, and the referenced fraction."""
        referenced = int(np.count_nonzero(self.refs))
        return dict(pages=self.num_pages, referenced=referenced, cached=len(self._cached), free=len(self._free),
                    occupancy=referenced / self.num_pages, reclaimed=self.reclaimed)
