"""The rollout engine for agentic RL: sessions whose latent cache stays resident between turns, continuous batching
over fixed decode slots with chunked prefill, a paged cache with shared prefixes and LRU preemption, and weight
updates between decode steps.

    eng = RolloutEngine(cfg, params, router_state, EngineConfig(slots=8, chunk=64, page_size=16, num_pages=512))
    s = eng.open(system + task)                      # a session (nothing computed yet)
    fut = eng.reply(s, SamplingParams(temperature=1.0, max_tokens=256, stop=((im_end,),)))
    eng.run()                                        # or a serving thread calling eng.step() in a loop
    c = fut.result()                                 # Completion: tokens, policy_logprobs, routing, versions, ...
    eng.append(s, observation)                       # next turn: only the new tokens are prefilled
    eng.set_context(s, system + task + summary)      # self-summarization restart: the common prefix is kept
    eng.end(s)

A session's tokens are its whole context: every appended token and every reply token. Its cache covers the first
`n_cached` of them; the rest are *pending* (after a reply, its last token; after an append, that plus the new
tokens). One `step()`:
  1. admit waiting replies into free decode slots (FIFO); a session whose cache is empty adopts the registered full
     pages its tokens start with (infer/paged_cache.py: a shared system prompt or task is computed once)
  2. prefill program [prefill_rows, chunk]: up to `prefill_rows` slotted sessions with more than one pending token
     feed their next ≤ chunk tokens (a long observation takes several steps while decoding goes on)
  3. decode program [slots, 1]: every slotted session with exactly one pending token feeds it
  4. a row whose last pending token was fed samples the next one; a stop sequence or max_tokens ends its reply and
     frees its slot (the session and its cache stay resident for the next turn)
Pages for the positions a program writes are taken just before it; when the pool has none left, the least recently
used session outside the program is preempted (its pages released, registered ones stay cached; it recomputes
whatever is gone when it next runs). Two compiled programs, of fixed shapes, whatever the mix (`compilations`).

MTP speculative decoding (`EngineConfig.num_draft` = D ≥ 1, infer/step.py): step 3 becomes the drafting program
[slots, 1 + D]: each slot's MTP depths draft D tokens from the trunk's h_0 (kept in a paged pool) and their own paged
latent caches, the trunk verifies them in the same pass, and the acceptance rule (infer/speculative.py) emits the
accepted drafts plus one token — greedy outputs are the plain decode's, sampled ones follow the same law. Positions
of rejected drafts are rolled back (length and page table); every emitted token records its version and log-probs
as a plainly decoded one would. The prefill program also runs the MTP depths over its chunk so their caches cover
the whole context; full pages are registered for sharing only 2D positions after they fill (their MTP entries are
final by then). `report()["acceptance"]` = accepted / drafted.

Weights (`update_weights`) change between steps without draining: each generated token records the version that
sampled it (`Completion.versions`). With `recompute_on_update` every session's cache is dropped and recomputed under
the new weights; the RL default keeps it (docs/rl.md: PipelineRL's in-flight updates; the trainer's importance
ratio already corrects per-token staleness through μ, and recomputing every context at every update would cost the
O(n·C) prefill the engine exists to avoid). Full pages are registered under their weight version, so new sessions
only adopt prefix pages computed by the current weights.

Meshes: an engine owns the devices of its mesh (expert and tensor parallelism for decode; data-parallel replicas
are separate engines on disjoint device sets, rl/services/rollout.py). Its weights, page pool and step programs live
there: `update_weights` reshards whatever it is given (a trainer's arrays on another mesh) with one `jax.device_put`
onto the engine's NamedShardings — device to device within a process, no host copy. `suspend()` frees the page pool
(a colocated placement time-shares the devices with the trainer) and `resume()` allocates it again; sessions
recompute their contexts, as after preemption.

Router replay: `Completion.routing[j]` are the experts of the position that produced token j and `prompt_routing`
those of context positions 0..P−2, as the static engine reports them (`replay_routing()` lines up with the trainer's
input tokens); positions adopted from a shared page carry the routing recorded when the page was computed.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from concurrent.futures import Future
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from composer2_jax import sharding as shd
from composer2_jax.infer import paged_cache, sampler
from composer2_jax.infer.static_engine import (
    Completion,
    SamplingParams,
    moe_layers,
    param_shardings,
)
from composer2_jax.infer.step import TRACES, DraftRows, MtpBlock, Rows, StepProgram, draft_step, engine_step
from composer2_jax.model.decoding import Decoder, Feed
from composer2_jax.model.layers import dtype_of
from composer2_jax.model_config import ModelConfig


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    """Shapes of the rollout engine's two programs and its page pool."""

    slots: int = 8  # decode slots: replies that advance together, one token each per step
    chunk: int = 64  # prefill tokens per row per step
    prefill_rows: int = 2  # rows prefilled per step (the prefill program is [prefill_rows, chunk])
    page_size: int = 16  # cache positions per page
    num_pages: int = 256  # pages in the pool (a page id names the same positions in every layer)
    max_len: int = 2048  # the longest session context; a page table has max_len / page_size entries
    max_sessions: int = 1024  # open sessions beyond this evict (end) the least recently used idle one
    recompute_on_update: bool = False  # new weights: keep the cached contexts (False: the RL default) or recompute
    num_draft: int = 0  # MTP speculative decoding: tokens drafted per slot per decode step (≤ model.num_mtp_layers)

    def __post_init__(self):
        if min(self.slots, self.chunk, self.prefill_rows, self.page_size, self.num_pages, self.max_sessions) < 1:
            raise ValueError(f"EngineConfig sizes must all be ≥ 1, got {self}")
        if self.num_draft < 0:
            raise ValueError(f"EngineConfig.num_draft must be ≥ 0 (0 = plain decoding), got {self.num_draft}")
        if self.max_len % self.page_size:
            raise ValueError(f"max_len={self.max_len} must be a multiple of page_size={self.page_size}")
        if self.prefill_rows > self.slots:
            raise ValueError(f"prefill_rows={self.prefill_rows} exceeds slots={self.slots}")

    @property
    def table_pages(self) -> int:
        """Entries of a page table."""
        return self.max_len // self.page_size


DECODE_AXES = ("data", "fsdp", "expert", "tensor")  # mesh axes an engine may use (no stage, no context)


def check_engine_mesh(cfg: ModelConfig, ecfg: EngineConfig, mesh) -> None:
    """ValueError unless the mesh suits a decode engine: no pipeline or context axis, batch axes that divide the
    slots and prefill rows, and axes that divide every model dimension they shard (heads, experts, widths)."""
    shape = dict(mesh.shape)
    for axis in ("stage", "context"):
        if shape.get(axis, 1) != 1:
            raise ValueError(f"rollout engine mesh has {axis}={shape[axis]}; expected 1 (an engine shards decode "
                             f"over {DECODE_AXES} only)")
    mult = shd.axis_size(mesh, shd.mesh_axes_of("activation_batch"))
    shd.validate_model_mesh(cfg, mesh, batch=mult, seq_len=1)  # heads, experts, widths (rows are checked next)
    if ecfg.slots % mult or ecfg.prefill_rows % mult:
        raise ValueError(f"slots={ecfg.slots} and prefill_rows={ecfg.prefill_rows} must be multiples of the "
                         f"mesh's batch-sharding size {mult}")


@dataclasses.dataclass
class _Reply:
    """A reply in progress."""

    sp: SamplingParams
    start: int  # context length when the reply was asked for
    future: Future
    tokens: list = dataclasses.field(default_factory=list)
    logprobs: list = dataclasses.field(default_factory=list)
    policy: list = dataclasses.field(default_factory=list)
    raw: list = dataclasses.field(default_factory=list)
    versions: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Session:
    """One episode's context and its share of the page pool (host state)."""

    uid: int
    tokens: list
    n_cached: int = 0  # tokens[:n_cached] are in the cache
    pages: list = dataclasses.field(default_factory=list)  # page table: pages[i] holds positions i·Y .. i·Y+Y−1
    digests: list = dataclasses.field(default_factory=list)  # prefix digest of each full page held
    routing: Optional[np.ndarray] = None  # [capacity, L_moe, k] experts of each computed position
    cached_version: Optional[np.ndarray] = None  # [capacity] weight version that computed each cached position
    reply: Optional[_Reply] = None
    last_used: int = 0
    computed: int = 0  # positions this session's forward passes computed (prefill and decode, recompute included)

    @property
    def pending(self) -> int:
        """Tokens not yet in the cache."""
        return len(self.tokens) - self.n_cached


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    diff = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(diff[0]) if diff.size else n


def _stops_at(tokens: list, stops) -> bool:
    """Whether the tokens end with one of the stop sequences."""
    return any(len(tokens) >= len(s) and tuple(tokens[-len(s):]) == s for s in stops)


class RolloutEngine:
    """Sessions, continuous batching and a paged latent cache; see the module docstring."""

    def __init__(self, cfg: ModelConfig, params, router_state, ecfg: EngineConfig = EngineConfig(), mesh=None, *,
                 version: int = 0, absorb: bool = True):
        if ecfg.max_len > cfg.max_position_embeddings:
            raise ValueError(f"EngineConfig.max_len={ecfg.max_len} exceeds model.max_position_embeddings="
                             f"{cfg.max_position_embeddings}")
        self.cfg, self.ecfg, self.mesh, self.absorb = cfg, ecfg, mesh, absorb
        if mesh is not None:
            check_engine_mesh(cfg, ecfg, mesh)
        if ecfg.num_draft > cfg.num_mtp_layers:
            raise ValueError(f"EngineConfig.num_draft={ecfg.num_draft} exceeds model.num_mtp_layers="
                             f"{cfg.num_mtp_layers} (each drafted token needs its MTP depth)")
        self._lock = threading.RLock()
        self._shardings = None if mesh is None else param_shardings(cfg, mesh)
        self.sync_s: list[float] = []  # seconds of each `update_weights` placement (reshard + transfer)
        self._set_weights(params, router_state, version)
        self.pool = paged_cache.PagePool(ecfg.num_pages, ecfg.page_size)
        # the trunk's page pool, and the MTP depths' and h_0 pools under the same page tables when drafting
        self._pools, self._draft_pools = self._new_pools()
        self._routed = (moe_layers(cfg), cfg.num_experts_per_tok) if moe_layers(cfg) else None
        self.sessions: dict[int, Session] = {}
        self._uids = itertools.count()
        self._slots: list[Optional[Session]] = [None] * ecfg.slots
        self._waiting: list[Session] = []
        self._clock = 0
        self._warp: Optional[sampler.Warp] = None
        self.stats = dict(steps=0, prefill_programs=0, decode_programs=0, computed=0, adopted=0, generated=0,
                          preemptions=0, evictions=0, weight_updates=0, suspensions=0, drafted=0, accepted=0)

    # ------------------------------------------------------------------------------------------- sessions

    def open(self, tokens: Sequence[int] = ()) -> int:
        """A new session with these context tokens; returns its id."""
        with self._lock:
            self._check_tokens(tokens)
            idle = [s for s in self.sessions.values() if s.reply is None]
            if len(self.sessions) >= self.ecfg.max_sessions and idle:
                self._end(min(idle, key=lambda s: s.last_used))
                self.stats["evictions"] += 1
            s = Session(next(self._uids), list(tokens))
            self.sessions[s.uid] = s
            self._touch(s)
            return s.uid

    def append(self, sid: int, tokens: Sequence[int]) -> None:
        """Add context tokens (a prompt, a tool observation) after the session's last reply."""
        with self._lock:
            s = self._idle(sid)
            self._check_tokens(tokens, len(s.tokens))
            s.tokens.extend(int(t) for t in tokens)

    def set_context(self, sid: int, tokens: Sequence[int]) -> None:
        """Replace the context (a self-summarization restart, or a harness re-rendering the whole prompt): the cache
        of the longest common prefix is kept (rounded down to a page), the rest recomputed when needed."""
        with self._lock:
            s = self._idle(sid)
            self._check_tokens(tokens)
            keep = _common_prefix(s.tokens, tokens)
            if keep < s.n_cached:
                self._truncate(s, keep)
            s.tokens = [int(t) for t in tokens]

    def tokens(self, sid: int) -> list[int]:
        """The session's context (every appended and generated token)."""
        with self._lock:
            return list(self._get(sid).tokens)

    def reply(self, sid: int, sp: SamplingParams = SamplingParams()) -> Future:
        """Ask for the next reply; the Future resolves to a `Completion` (its tokens join the context)."""
        with self._lock:
            s = self._idle(sid)
            if not s.tokens:
                raise ValueError(f"session {sid} has no tokens to reply to")
            if len(s.tokens) + sp.max_tokens > self.ecfg.max_len:
                raise ValueError(f"session {sid}: context {len(s.tokens)} + max_tokens {sp.max_tokens} exceeds "
                                 f"EngineConfig.max_len={self.ecfg.max_len}")
            if sp.vocab_limit > self.cfg.vocab_size:
                raise ValueError(f"SamplingParams.vocab_limit={sp.vocab_limit} exceeds the model's vocab_size="
                                 f"{self.cfg.vocab_size}")
            if self._warp is None:
                self._warp = sp.warp()
            elif sp.warp() != self._warp:
                raise ValueError(f"this engine samples with {self._warp} (fixed by its first reply: one compiled "
                                 f"program); got {sp.warp()}")
            if s.pending == 0:  # a context cut back to cached positions: its last token must be fed again
                self._truncate(s, len(s.tokens) - 1)
            s.reply = _Reply(sp, len(s.tokens), Future())
            self._waiting.append(s)
            return s.reply.future

    def end(self, sid: int) -> None:
        """Close a session: its pages go back to the pool (registered full pages stay cached for reuse)."""
        with self._lock:
            self._end(self._idle(sid))

    # ------------------------------------------------------------------------------------------- weights

    @property
    def devices(self) -> list:
        """The devices this engine runs on (its mesh's, or the default device)."""
        return list(self.mesh.devices.flat) if self.mesh is not None else [jax.devices()[0]]

    def update_weights(self, params, router_state, version: int) -> None:
        """New weights from the next step on (no draining); recompute cached contexts if the config says so."""
        with self._lock:
            t0 = time.perf_counter()
            self._set_weights(params, router_state, version)
            jax.block_until_ready((self.params, self.router_state))
            self.sync_s.append(time.perf_counter() - t0)
            self.stats["weight_updates"] += 1
            if self.ecfg.recompute_on_update:
                for s in self.sessions.values():
                    self._release(s)
                self.pool.drop_registry()

    def _set_weights(self, params, router_state, version: int) -> None:
        """Unboxed weights, placed by their logical axes when there is a mesh."""
        p, r = nn.unbox(params), nn.unbox(router_state or {})
        if self.mesh is not None:
            p_sh, r_sh = self._shardings
            p = jax.device_put(p, {k: v for k, v in p_sh.items() if k in p})
            r = jax.device_put(r, {k: v for k, v in r_sh.items() if k in r})
        self.params, self.router_state, self.version = p, r, int(version)

    # ------------------------------------------------------------------------------------------- serving

    @property
    def busy(self) -> bool:
        """Whether some reply is waiting or running."""
        return bool(self._waiting) or any(s is not None for s in self._slots)

    def run(self, max_steps: int = 1_000_000) -> None:
        """Step until every reply is done."""
        for _ in range(max_steps):
            if not self.step():
                return
        raise RuntimeError(f"replies still running after max_steps={max_steps}")

    def step(self) -> bool:
        """One engine step (module docstring); False when there was nothing to do."""
        with self._lock:
            self._admit()
            live = [s for s in self._slots if s is not None]
            if live and self._pools is None:
                raise RuntimeError("the engine is suspended (its page pool is freed); resume() it before stepping")
            if not live:
                return False
            self._clock += 1
            self.stats["steps"] += 1
            pre = [s for s in live if s.pending > 1][:self.ecfg.prefill_rows]
            if pre:
                self._program(pre, self.ecfg.chunk, self.ecfg.prefill_rows)
                self.stats["prefill_programs"] += 1
            fed = {id(s) for s in pre}  # by identity: Session's dataclass equality compares whole contexts
            dec = [s for s in self._slots if s is not None and s.pending == 1 and id(s) not in fed]
            if dec and self.ecfg.num_draft:
                self._draft_program(dec)
                self.stats["decode_programs"] += 1
            elif dec:
                self._program(dec, 1, self.ecfg.slots)
                self.stats["decode_programs"] += 1
            return True

    @property
    def suspended(self) -> bool:
        """Whether the page pool is freed (`suspend`)."""
        return self._pools is None

    def suspend(self) -> None:
        """Free the page pool (a colocated trainer takes the devices): every session's cache is released, registered
        pages forgotten; replies in flight stay in their slots and recompute their contexts after `resume`."""
        with self._lock:
            for s in self.sessions.values():
                self._release(s)
            self.pool.drop_registry()
            self._pools = self._draft_pools = None
            self.stats["suspensions"] += 1

    def resume(self) -> None:
        """Allocate the page pool again after `suspend`."""
        with self._lock:
            if self._pools is None:
                self._pools, self._draft_pools = self._new_pools()

    def fail_all(self, error: BaseException) -> None:
        """Fail every waiting or running reply with `error` (the server is going away); sessions stay open."""
        with self._lock:
            for s in self.sessions.values():
                if s.reply is not None:
                    r, s.reply = s.reply, None
                    r.future.set_exception(error)
            self._waiting, self._slots = [], [None] * self.ecfg.slots

    @property
    def compilations(self) -> int:
        """How many times the step program was traced, all engines in this process (fixed shapes: once each)."""
        return sum(TRACES.values())

    def report(self) -> dict:
        """Counters, pool occupancy and cache bytes (per token, pool total, held by sessions)."""
        bpt = paged_cache.bytes_per_token(self.cfg, self.cfg.num_layers, jnp.dtype(dtype_of(self.cfg.dtype)).itemsize)
        occ = self.pool.occupancy()
        d = self.stats["drafted"]
        return dict(self.stats, **occ, acceptance=self.stats["accepted"] / d if d else None,
                    bytes_per_token=bpt, pool_bytes=bpt * self.ecfg.num_pages * self.ecfg.page_size,
                    held_bytes=bpt * occ["referenced"] * self.ecfg.page_size, sessions=len(self.sessions))

    # ------------------------------------------------------------------------------------------- internals

    def _get(self, sid: int) -> Session:
        if sid not in self.sessions:
            raise KeyError(f"no open session {sid} (ended or evicted)")
        return self.sessions[sid]

    def _idle(self, sid: int) -> Session:
        s = self._get(sid)
        if s.reply is not None:
            raise ValueError(f"session {sid} is generating a reply; wait for it first")
        return s

    def _check_tokens(self, tokens: Sequence[int], already: int = 0) -> None:
        bad = [t for t in tokens if not 0 <= t < self.cfg.vocab_size]
        if bad:
            raise ValueError(f"token ids {bad[:5]} lie outside [0, vocab_size={self.cfg.vocab_size})")
        if already + len(tokens) > self.ecfg.max_len:
            raise ValueError(f"context of {already + len(tokens)} tokens exceeds EngineConfig.max_len="
                             f"{self.ecfg.max_len}")

    def _touch(self, s: Session) -> None:
        s.last_used = self._clock

    def _end(self, s: Session) -> None:
        self._release(s)
        del self.sessions[s.uid]

    def _release(self, s: Session) -> None:
        """Drop the session's whole cache (it recomputes when it next runs)."""
        for page in s.pages:
            self.pool.release(page)
        s.pages, s.digests, s.n_cached = [], [], 0

    def _truncate(self, s: Session, keep: int) -> None:
        """Keep the cache of positions < keep, rounded down to a whole page."""
        n_pages = keep // self.ecfg.page_size
        for page in s.pages[n_pages:]:
            self.pool.release(page)
        s.pages, s.digests = s.pages[:n_pages], s.digests[:n_pages]
        s.n_cached = n_pages * self.ecfg.page_size

    def _admit(self) -> None:
        """Waiting replies into free slots (FIFO)."""
        for i, slot in enumerate(self._slots):
            if slot is None and self._waiting:
                s = self._waiting.pop(0)
                self._slots[i] = s
                self._touch(s)

    def _adopt(self, s: Session) -> None:
        """Take registered pages for the session's next full pages (never its last token: it must be fed)."""
        y = self.ecfg.page_size
        while (len(s.pages) * y == s.n_cached == len(s.digests) * y) and s.n_cached + y <= len(s.tokens) - 1:
            parent = s.digests[-1] if s.digests else b""
            digest = paged_cache.page_digest(parent, s.tokens[s.n_cached:s.n_cached + y], self.version)
            page = self.pool.lookup(digest)
            if page is None:
                return
            self.pool.retain(page)
            self._grow(s, s.n_cached + y)
            if self._routed is not None:
                s.routing[s.n_cached:s.n_cached + y] = self.pool.meta[page]
            s.cached_version[s.n_cached:s.n_cached + y] = self.version
            s.pages.append(page)
            s.digests.append(digest)
            s.n_cached += y
            self.stats["adopted"] += y

    def _grow(self, s: Session, n: int) -> None:
        """Make the per-position records hold n positions."""
        have = 0 if s.cached_version is None else len(s.cached_version)
        if n <= have:
            return
        cap = max(n, 2 * have, 64)
        ver = np.full((cap,), -1, np.int64)
        if have:
            ver[:have] = s.cached_version
        s.cached_version = ver
        if self._routed is not None:
            rt = np.zeros((cap,) + self._routed, np.int32)
            if have:
                rt[:have] = s.routing
            s.routing = rt

    def _reserve(self, rows: list[Session], fed: list[int]) -> None:
        """Pages for every position the program writes; preempt least recently used sessions when none is left."""
        y = self.ecfg.page_size
        for s, n in zip(rows, fed):
            while len(s.pages) * y < min(s.n_cached + n, self.ecfg.max_len):
                page = self.pool.alloc()
                while page is None:
                    self._preempt(exclude=rows)
                    page = self.pool.alloc()
                s.pages.append(page)

    def _preempt(self, exclude: list[Session]) -> None:
        """Release the least recently used other session's cache (idle sessions first)."""
        held = [s for s in self.sessions.values() if s.pages and all(s is not e for e in exclude)]
        if not held:
            need = sum(len(s.pages) for s in exclude)
            raise RuntimeError(f"the page pool ({self.ecfg.num_pages} pages of {self.ecfg.page_size}) cannot hold "
                               f"this step's {len(exclude)} rows ({need}+ pages); raise EngineConfig.num_pages")
        victim = min(held, key=lambda s: (s.reply is not None, s.last_used))
        self._release(victim)
        self.stats["preemptions"] += 1

    def _program(self, rows: list[Session], t: int, b: int) -> None:
        """Run one fixed-shape program [b, t] over these rows and commit its results."""
        for s in rows:
            self._adopt(s)
        fed = [min(t, s.pending) for s in rows]
        self._reserve(rows, fed)
        tok = np.zeros((b, t), np.int32)
        pos = np.zeros((b, t), np.int32)
        valid = np.zeros((b, t), bool)
        table = np.zeros((b, self.ecfg.table_pages), np.int32)
        seed, uid = np.zeros((b,), np.uint32), np.zeros((b,), np.int32)
        temp, top_p = np.ones((b,), np.float32), np.ones((b,), np.float32)
        for i, (s, n) in enumerate(zip(rows, fed)):
            tok[i, :n] = s.tokens[s.n_cached:s.n_cached + n]
            pos[i] = s.n_cached + np.arange(t)
            valid[i, :n] = True
            table[i, :len(s.pages)] = s.pages
            sp = s.reply.sp
            seed[i], uid[i], temp[i], top_p[i] = sp.seed, s.uid, max(sp.temperature, 1e-6), sp.top_p
        extra = ()
        if self.ecfg.num_draft:
            extra = (self._draft_pools, MtpBlock(*self._mtp_inputs(rows, fed, t, b)))
        out = self._call(engine_step, self._pools, Feed(tok, pos, valid), table, Rows(seed, uid, temp, top_p), *extra)
        self._pools = out.pools
        if self.ecfg.num_draft:
            self._draft_pools = out.draft_pools
        host = jax.device_get(out._replace(pools=(), draft_pools=None))
        for i, (s, n) in enumerate(zip(rows, fed)):
            self._commit(s, n, host, i)

    def _mtp_inputs(self, rows: list[Session], fed: list[int], t: int, b: int):
        """The prefill program's MTP block per row: positions [c − 2D, c + t) (c = first fed position), each depth's
        input token t_{j+k} where the context has it, written where all D next tokens are in the context, the
        trunk has computed the position, and its page is the session's own (infer/step.py)."""
        d = self.ecfg.num_draft
        width = t + 2 * d
        mtp_pos = np.zeros((b, width), np.int32)
        mtp_tok = np.zeros((b, width, d), np.int32)
        mtp_write = np.zeros((b, width), bool)
        for i, (s, n) in enumerate(zip(rows, fed)):
            c = s.n_cached
            j = c - 2 * d + np.arange(width)
            mtp_pos[i] = j
            ctx = np.asarray(s.tokens, np.int32)
            for m in range(d):
                at = j + m + 1
                ok = (at >= 0) & (at < len(ctx))
                mtp_tok[i, ok, m] = ctx[at[ok]]
            mtp_write[i] = ((j >= self.ecfg.page_size * len(s.digests)) & (j < c + n) & (j + d <= len(ctx) - 1))
        return mtp_tok, mtp_pos, mtp_write

    def _draft_program(self, rows: list[Session]) -> None:
        """The drafting decode program [slots, 1 + D] over these rows (each with one pending token), then commit."""
        d, b, y = self.ecfg.num_draft, self.ecfg.slots, self.ecfg.page_size
        for s in rows:
            self._adopt(s)
        self._reserve(rows, [1 + d] * len(rows))
        tail = np.zeros((b, 3 * d), np.int32)
        n_b, live = np.zeros((b,), np.int32), np.zeros((b,), bool)
        table = np.zeros((b, self.ecfg.table_pages), np.int32)
        mtp_from = np.zeros((b,), np.int32)
        seed, uid = np.zeros((b,), np.uint32), np.zeros((b,), np.int32)
        temp, top_p = np.ones((b,), np.float32), np.ones((b,), np.float32)
        for i, s in enumerate(rows):
            n = s.n_cached
            lo = n - 2 * d + 1
            got = s.tokens[max(lo, 0):n + 1]
            tail[i, 2 * d - len(got):2 * d] = got
            n_b[i], live[i] = n, True
            table[i, :len(s.pages)] = s.pages
            mtp_from[i] = y * len(s.digests)
            sp = s.reply.sp
            seed[i], uid[i], temp[i], top_p[i] = sp.seed, s.uid, max(sp.temperature, 1e-6), sp.top_p
        out = self._call(draft_step, self._pools, self._draft_pools, DraftRows(tail, n_b, live, mtp_from), table,
                         Rows(seed, uid, temp, top_p))
        self._pools, self._draft_pools = out.pools, out.draft_pools
        host = jax.device_get(out._replace(pools=(), draft_pools=()))
        for i, s in enumerate(rows):
            self._commit_drafted(s, host, i)

    def _commit_drafted(self, s: Session, out, i: int) -> None:
        """Commit the a accepted drafts and the replacement/bonus token one by one (a stop sequence or max_tokens may
        end the reply before the last), then roll back: the session keeps positions < its new length − 1."""
        r, a = s.reply, int(out.accepted[i])
        self.stats["drafted"] += self.ecfg.num_draft
        self.stats["accepted"] += a
        for j in range(a + 1):
            start = s.n_cached  # position n + j, fed this step: x_n, then the accepted drafts
            self._grow(s, start + 2)
            if self._routed is not None:
                s.routing[start] = out.routing[:, i, j]
            s.cached_version[start] = self.version
            s.n_cached += 1
            s.computed += 1
            self.stats["computed"] += 1
            tok = int(out.token[i, j])
            r.tokens.append(tok)
            r.logprobs.append(float(out.logprob[i, j]))
            r.policy.append(float(out.policy_logprob[i, j]))
            r.raw.append(float(out.raw_logprob[i, j]))
            r.versions.append(self.version)
            s.tokens.append(tok)
            self.stats["generated"] += 1
            stopped = _stops_at(r.tokens, r.sp.stop)
            if stopped or len(r.tokens) >= r.sp.max_tokens:
                self._finish(s, "stop" if stopped else "length")
                break
        keep = -(-s.n_cached // self.ecfg.page_size)  # pages past the committed length held only rejected positions
        for page in s.pages[keep:]:
            self.pool.release(page)
        del s.pages[keep:]
        self._register(s)
        self._touch(s)

    def _call(self, fn, *args):
        """A jitted step program (infer/step.py) on the engine's weights, under the mesh when there is one (host
        arrays batch-sharded)."""
        prog = StepProgram(Decoder(self.cfg, self.absorb, self.mesh), self._warp)
        variables = {"params": self.params, "router_state": self.router_state}
        if self.mesh is None:
            return fn(variables, *args, prog=prog)
        with shd.activate(self.mesh):
            batch = jax.sharding.NamedSharding(self.mesh, shd.logical_to_spec(("activation_batch",)))
            put = lambda a: a if not isinstance(a, np.ndarray) else jax.device_put(a, batch)  # noqa: E731
            return fn(variables, *jax.tree.map(put, args), prog=prog)

    def _new_pools(self):
        """Empty page pools — the trunk's, and the MTP depths' and h_0 pools when drafting (else None) — replicated
        over the mesh (page ids are global)."""
        c, e, dt = self.cfg, self.ecfg, dtype_of(self.cfg.dtype)
        pools = paged_cache.init_pools(c, c.num_layers, e.num_pages, e.page_size, dt)
        draft = paged_cache.init_draft_pools(c, e.num_draft, e.num_pages, e.page_size, dt) if e.num_draft else None
        if self.mesh is None:
            return pools, draft
        return jax.device_put((pools, draft), jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec()))

    def _commit(self, s: Session, n: int, out, i: int) -> None:
        """Record the fed positions (routing, version, full pages), then the sampled token if the row sampled."""
        start = s.n_cached
        self._grow(s, start + n + 1)
        if self._routed is not None:
            s.routing[start:start + n] = np.transpose(out.routing[:, i, :n], (1, 0, 2))
        s.cached_version[start:start + n] = self.version
        s.n_cached += n
        s.computed += n
        self.stats["computed"] += n
        self._register(s)
        self._touch(s)
        if s.pending:
            return
        r = s.reply
        tok = int(out.token[i])
        r.tokens.append(tok)
        r.logprobs.append(float(out.logprob[i]))
        r.policy.append(float(out.policy_logprob[i]))
        r.raw.append(float(out.raw_logprob[i]))
        r.versions.append(self.version)
        s.tokens.append(tok)
        self.stats["generated"] += 1
        stopped = _stops_at(r.tokens, r.sp.stop)
        if stopped or len(r.tokens) >= r.sp.max_tokens:
            self._finish(s, "stop" if stopped else "length")

    def _register(self, s: Session) -> None:
        """Register the session's pages that became full (computed entirely by the current weights)."""
        y = self.ecfg.page_size
        while (len(s.digests) + 1) * y <= s.n_cached - 2 * self.ecfg.num_draft:  # drafting: MTP entries final
            i = len(s.digests)
            parent = s.digests[-1] if s.digests else b""
            same = bool(np.all(s.cached_version[i * y:(i + 1) * y] == self.version))
            digest = paged_cache.page_digest(parent, s.tokens[i * y:(i + 1) * y], self.version if same else -1)
            s.digests.append(digest)
            if same:
                meta = None if self._routed is None else s.routing[i * y:(i + 1) * y].copy()
                self.pool.register(s.pages[i], digest, meta)

    def _finish(self, s: Session, reason: str) -> None:
        """Resolve the reply's Future and free its slot."""
        r = s.reply
        p, n = r.start, len(r.tokens)
        routing = prompt_routing = None
        if self._routed is not None:
            routing, prompt_routing = s.routing[p - 1:p - 1 + n].copy(), s.routing[:p - 1].copy()
        c = Completion(list(r.tokens), r.logprobs, routing, reason, r.policy, r.raw, prompt_routing,
                       versions=list(r.versions))
        self._slots[next(i for i, x in enumerate(self._slots) if x is s)] = None
        s.reply = None
        r.future.set_result(c)
