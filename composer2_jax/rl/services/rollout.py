"""Rollout worker: the rollout engine (infer/rollout_engine.py) serving many concurrent multi-turn episodes, with
weight updates between decode steps.

Episode threads (the environment workers' harness loops) `submit` one reply request at a time, each with its whole
context; a request carrying a `session` key (one per episode, `episode_policy`) reuses that episode's engine session,
so only the tokens added since its last reply are prefilled (a summary restart keeps the common prefix). Requests
without a key open a session for the one reply (full pages of earlier contexts are still shared through the page
registry). The serving loop hands new requests to the engine, picks up the newest published weights between steps
(in flight: no draining), and runs one engine step at a time: fixed decode slots, chunked prefill, two compiled
programs whatever the mix.

Every reply carries the sampler's behaviour log-probs μ (`policy_logprobs`), the routing of every forward position
(router replay) and the weight version of each token; `Generation.version` is its oldest (a reply may straddle an
update), so an episode is a partial rollout whose turns record their versions for the trainer. Whether cached
contexts are kept or recomputed under new weights is `RolloutConfig.recompute_on_update` (docs/rl.md: kept, the
default). A context longer than prompt_len is an error naming both numbers.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from concurrent.futures import Future
from typing import Any, Callable, Hashable, Optional

import numpy as np

from composer2_jax.env.harness import Completion as HarnessCompletion
from composer2_jax.infer import SamplingParams
from composer2_jax.infer.rollout_engine import EngineConfig, RolloutEngine
from composer2_jax.rl.services.records import Counters
from composer2_jax.rl.services.routing import CallRecord
from composer2_jax.rl.services.weights import Weights, WeightStore

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class RolloutConfig:
    """Shapes, cache and sampling of the rollout engine."""

    batch_size: int = 16  # decode slots: replies that advance together (more wait for a free slot)
    prompt_len: int = 512  # the longest context a reply may be asked for
    max_new_tokens: int = 200  # new tokens per reply (the harness's max_new_tokens must not exceed it)
    temperature: float = 1.0  # sampling temperature (the trainer's π_θ uses the same)
    seed: int = 0  # sampling seed (keys also fold in the session and the position)
    chunk: int = 64  # prefill tokens per row per engine step
    prefill_rows: int = 2  # rows prefilled per engine step (≤ batch_size)
    page_size: int = 16  # latent cache positions per page
    num_pages: int = 0  # pages in the pool; 0 = room for 2 × batch_size full contexts
    max_sessions: int = 256  # open episode sessions beyond this evict the least recently used idle one
    recompute_on_update: bool = False  # new weights: keep cached contexts (the RL default, docs/rl.md) or recompute
    num_draft: int = 0  # MTP speculative decoding: tokens drafted per slot per step (≤ model.num_mtp_layers; 0 = off)

    def __post_init__(self):
        if min(self.batch_size, self.prompt_len, self.max_new_tokens, self.chunk, self.prefill_rows,
               self.page_size, self.max_sessions) < 1 or self.temperature <= 0 or min(self.num_pages,
                                                                                          self.num_draft) < 0:
            raise ValueError(f"RolloutConfig {self}: sizes must be ≥ 1 (num_pages, num_draft ≥ 0) and temperature > 0")
        if self.prefill_rows > self.batch_size:
            raise ValueError(f"prefill_rows={self.prefill_rows} exceeds batch_size={self.batch_size}")

    def engine_config(self) -> EngineConfig:
        """The engine's shapes: contexts up to prompt_len + max_new_tokens, rounded up to whole pages."""
        max_len = -(-(self.prompt_len + self.max_new_tokens) // self.page_size) * self.page_size
        pages = self.num_pages or 2 * self.batch_size * max_len // self.page_size
        return EngineConfig(slots=self.batch_size, chunk=self.chunk, prefill_rows=self.prefill_rows,
                            page_size=self.page_size, num_pages=pages, max_len=max_len,
                            max_sessions=self.max_sessions, recompute_on_update=self.recompute_on_update,
                            num_draft=self.num_draft)


@dataclasses.dataclass(frozen=True)
class Generation:
    """One reply: sampled ids, log μ per id, the weight version(s), and the routing record."""

    ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    version: int  # the oldest version that sampled one of its tokens
    routing: np.ndarray | None  # [n, L_moe, k]
    prompt_routing: np.ndarray | None  # [P−1, L_moe, k]
    versions: tuple[int, ...] = ()  # the version of each token


@dataclasses.dataclass
class _Request:
    prompt: list[int]
    max_new_tokens: int
    session: Optional[Hashable]
    future: Future


class RolloutWorker:
    """Serves reply requests from episode threads on one rollout engine; see the module docstring."""

    sessions = True  # `submit` takes a session key (episode_policy gives each episode one)

    def __init__(self, model_cfg: Any, store: WeightStore, rc: RolloutConfig, stop_id: int,
                 counters: Counters | None = None, engine_factory: Callable | None = None, vocab_limit: int = 0):
        self.model_cfg, self.store, self.rc, self.stop_id = model_cfg, store, rc, stop_id
        self.vocab_limit = vocab_limit  # ids ≥ this are never sampled (0 = all; orchestrator.vocab_limit)
        self.counters = counters or Counters()
        self._engine_factory = engine_factory or _default_engine
        self._engine: Optional[RolloutEngine] = None
        self._weights: Optional[Weights] = None
        self._sessions: dict[Hashable, int] = {}  # episode key → engine session id
        self._drafts_seen: dict[str, int] = {}  # engine draft counters already added to `counters`
        self._pending: list[_Request] = []
        self._cond = threading.Condition()
        self._fault: BaseException | None = None
        self._closed: BaseException | None = None
        self.thread: threading.Thread | None = None

    @property
    def version(self) -> int:
        """Version of the weights the engine holds (−1 before the first request)."""
        return -1 if self._weights is None else self._weights.version

    @property
    def engine(self) -> Optional[RolloutEngine]:
        """The engine (None before the first request)."""
        return self._engine

    def submit(self, prompt: list[int], max_new_tokens: int, session: Optional[Hashable] = None) -> Future:
        """Queue one reply request; the Future resolves to a Generation (or the error that stopped the worker)."""
        if max_new_tokens > self.rc.max_new_tokens or len(prompt) > self.rc.prompt_len:
            raise ValueError(f"request of {len(prompt)} prompt + {max_new_tokens} new tokens exceeds the rollout's "
                             f"prompt_len={self.rc.prompt_len} / max_new_tokens={self.rc.max_new_tokens}")
        fut: Future = Future()
        with self._cond:
            if self._closed is not None:
                raise self._closed
            self._pending.append(_Request(list(prompt), max_new_tokens, session, fut))
            self._cond.notify_all()
        return fut

    def generate(self, prompt: list[int], max_new_tokens: int, session: Optional[Hashable] = None) -> Generation:
        """Blocking `submit`."""
        return self.submit(prompt, max_new_tokens, session).result()

    def inject_fault(self, error: BaseException) -> None:
        """Make the serving thread die with `error` at its next step (fault-tolerance tests)."""
        self._fault = error

    def start(self, stop: threading.Event) -> threading.Thread:
        """Run `serve` on a daemon thread."""
        self.thread = threading.Thread(target=self.serve, args=(stop,), name="rollout", daemon=True)
        self.thread.start()
        return self.thread

    @property
    def max_prompt(self) -> int:
        """The longest context the engine takes."""
        return self.rc.prompt_len

    def serve(self, stop: threading.Event) -> None:
        """Admit requests and step the engine until `stop`; an exception fails every waiting request and ends the
        thread (logged; a new engine is built on restart)."""
        while not stop.is_set():
            with self._cond:
                self._cond.wait_for(lambda: self._pending or stop.is_set() or (self._engine and self._engine.busy),
                                    timeout=0.1)
                batch, self._pending = self._pending, []
            try:
                if self._fault is not None:
                    fault, self._fault = self._fault, None
                    raise fault
                self._refresh()
                for r in batch:
                    self._admit(r)
                batch = []
                if self._engine.step():
                    self.counters.add("rollout_steps")
                    self._count_drafts()
            except BaseException as e:  # noqa: BLE001 - every waiting episode gets the error, then we die
                for r in batch:
                    if not r.future.done():
                        r.future.set_exception(e)
                self.counters.add("rollout_worker_deaths")
                self._die(e)
                log.error("rollout worker died: %s: %s", type(e).__name__, e)
                return
        if self._engine is not None:  # stopped: replies still inside the engine would never finish
            self._engine.fail_all(RuntimeError("the rollout worker stopped"))

    def close(self, error: BaseException) -> None:
        """Refuse new requests with `error` and fail the queued ones and those inside the engine (the loop is
        stopping: nothing will step the engine again)."""
        with self._cond:
            self._closed = error
        self.fail_pending(error)
        if self._engine is not None:
            self._engine.fail_all(error)

    def fail_pending(self, error: BaseException) -> None:
        """Fail every queued request (the worker is going away)."""
        with self._cond:
            pending, self._pending = self._pending, []
        for r in pending:
            r.future.set_exception(error)

    def _die(self, error: BaseException) -> None:
        """Fail queued requests and the replies inside the engine; drop the engine (a restart rebuilds it)."""
        self.fail_pending(error)
        engine, self._engine, self._weights, self._sessions = self._engine, None, None, {}
        self._drafts_seen = {}
        if engine is not None:
            engine.fail_all(error)

    def _count_drafts(self) -> None:
        """Drafted and accepted MTP tokens since the last count (counters `rollout_drafted`, `rollout_accepted`:
        their ratio between two snapshots is the acceptance under the versions served in between)."""
        st = self._engine.stats
        for name in ("drafted", "accepted"):
            seen = self._drafts_seen.get(name, 0)
            if st[name] > seen:
                self.counters.add(f"rollout_{name}", st[name] - seen)
                self._drafts_seen[name] = st[name]

    def _refresh(self) -> None:
        """Build the engine on first use; later, swap in the newest published weights between steps."""
        newest = self.store.latest()
        if self._engine is None:
            self._engine = self._engine_factory(self.model_cfg, newest, self.rc.engine_config())
        elif newest.version != self._weights.version:
            self._engine.update_weights(newest.params, newest.router_state, newest.version)
        else:
            return
        self._weights = newest
        self.counters.add("rollout_weight_updates")

    def _admit(self, r: _Request) -> None:
        """Hand one request to the engine: its episode's session (context replaced: the common prefix is kept) or a
        one-reply session; the engine's Future completes ours."""
        eng = self._engine
        sid = self._sessions.get(r.session) if r.session is not None else None
        if sid is not None and sid in eng.sessions:
            eng.set_context(sid, r.prompt)
        else:
            sid = eng.open(r.prompt)
            if r.session is not None:
                self._sessions[r.session] = sid
        sp = SamplingParams(temperature=self.rc.temperature, max_tokens=r.max_new_tokens, stop=((self.stop_id,),),
                            seed=self.rc.seed, vocab_limit=self.vocab_limit)
        self.counters.add("rollout_requests")
        done = eng.reply(sid, sp)
        done.add_done_callback(lambda f, r=r, sid=sid: self._resolve(r, sid, f))

    def _resolve(self, r: _Request, sid: int, f: Future) -> None:
        """Our Future from the engine's (runs on the serving thread, under the engine's lock)."""
        if f.exception() is not None:
            r.future.set_exception(f.exception())
            return
        c = f.result()
        if r.session is None:
            self._engine.end(sid)
        r.future.set_result(Generation(tuple(c.tokens), tuple(c.policy_logprobs), min(c.versions), c.routing,
                                       c.prompt_routing, tuple(c.versions)))


def _default_engine(model_cfg: Any, weights: Weights, ecfg: EngineConfig) -> RolloutEngine:
    """A rollout engine over the published params (single device)."""
    return RolloutEngine(model_cfg, weights.params, weights.router_state, ecfg, version=weights.version)


class RolloutPolicy:
    """Harness Policy for one episode: forwards replies to a generate function and keeps their routing records.

    Two degenerate cases end the reply instead of failing the episode, so they still earn their (zero) reward:
    a context longer than `max_prompt` gets an empty reply (the harness then stops: no tool call), counted in
    `overflows`; an id the tokenizer cannot decode (a model vocabulary larger than the tokenizer's) cuts the reply
    before it (the kept prefix is still an exact sample with its own log μ), counted in `truncated`.
    """

    def __init__(self, generate: Callable[..., Generation], vocab_limit: int | None = None,
                 max_prompt: int | None = None, session: Optional[Hashable] = None):
        self._generate, self.vocab_limit, self.max_prompt = generate, vocab_limit, max_prompt
        self.session = session  # passed to `generate` when set: the episode's engine session
        self.calls: list[CallRecord] = []
        self.versions: list[int] = []
        self.truncated = self.overflows = 0

    def generate(self, prompt_ids, max_new_tokens: int) -> HarnessCompletion:
        """One reply with log μ and the version that sampled it."""
        if self.max_prompt is not None and len(prompt_ids) > self.max_prompt:
            self.overflows += 1
            return HarnessCompletion((), (), max(self.versions, default=0))
        if self.session is None:
            g = self._generate(list(prompt_ids), int(max_new_tokens))
        else:
            g = self._generate(list(prompt_ids), int(max_new_tokens), session=self.session)
        ids, logprobs, routing = g.ids, g.logprobs, g.routing
        if self.vocab_limit is not None:
            bad = next((i for i, t in enumerate(ids) if t >= self.vocab_limit), None)
            if bad is not None:
                ids, logprobs = ids[:bad], logprobs[:bad]
                routing = None if routing is None else routing[:bad]
                self.truncated += 1
        self.calls.append(CallRecord(tuple(int(t) for t in prompt_ids), ids, routing, g.prompt_routing))
        self.versions.append(g.version)
        return HarnessCompletion(ids, logprobs, g.version)


def episode_policy(rollout: Any, vocab_limit: int | None) -> RolloutPolicy:
    """A RolloutPolicy over a rollout worker (its prompt limit, if it has one), with a session of its own when the
    worker keeps sessions."""
    session = uuid.uuid4().hex if getattr(rollout, "sessions", False) else None
    return RolloutPolicy(rollout.generate, vocab_limit, getattr(rollout, "max_prompt", None), session)
