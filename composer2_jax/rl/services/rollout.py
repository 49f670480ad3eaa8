"""Rollout worker: the rollout engine (infer/rollout_engine.py) serving many concurrent multi-turn episodes, with
weight updates between decode steps.

Episode threads (the environment workers' harness loops) `submit` one reply request at a time, each with its whole
context; a request carrying a `session` key (one per episode, `episode_policy`) reuses that episode's engine session,
so only the tokens added since its last reply are prefilled (a summary restart keeps the common prefix). Requests
without a key open a session for the one reply (full pages of earlier contexts are still shared through the page
registry). The serving loop hands new requests to the engine, picks up the newest published weights between steps
(in flight: no draining), and runs one engine step at a time: fixed decode slots, chunked prefill, two compiled
programs whatever the mix. With `RolloutConfig.devices` the engines get meshes of their own: `replicas` data-parallel
engines on disjoint contiguous device sets, each sharded by `RolloutConfig.mesh` (expert × tensor for decode); new
sessions go to the least loaded engine and stay there. Each engine reshards published weights onto its mesh
(device to device in this process). `pause()`/`resume()` time-share the devices with a colocated trainer: the
engines' page pools are freed while paused and an episode in flight continues, at its next decode step, with the
version published meanwhile.

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

import jax
import numpy as np

from composer2_jax import sharding as shd
from composer2_jax.env.harness import Completion as HarnessCompletion
from composer2_jax.infer import SamplingParams
from composer2_jax.infer.rollout_engine import EngineConfig, RolloutEngine
from composer2_jax.rl.records import Counters
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
    first_device: int = 0  # the engines' devices begin at jax.devices()[first_device]
    devices: int = 0  # devices of all engines together (0 = one unsharded engine on the default device)
    replicas: int = 1  # data-parallel engines, each on its own devices / replicas contiguous devices
    mesh: shd.MeshConfig = shd.MeshConfig(fsdp=1, expert=-1)  # each engine's mesh over its devices (expert, tensor)
    num_draft: int = 0  # MTP speculative decoding: tokens drafted per slot per step (≤ model.num_mtp_layers; 0 = off)

    def __post_init__(self):
        if min(self.batch_size, self.prompt_len, self.max_new_tokens, self.chunk, self.prefill_rows,
               self.page_size, self.max_sessions) < 1 or self.temperature <= 0 or min(self.num_pages,
                                                                                          self.num_draft) < 0:
            raise ValueError(f"RolloutConfig {self}: sizes must be ≥ 1 (num_pages, num_draft ≥ 0) and temperature > 0")
        if self.prefill_rows > self.batch_size:
            raise ValueError(f"prefill_rows={self.prefill_rows} exceeds batch_size={self.batch_size}")
        if self.first_device < 0 or self.devices < 0 or self.replicas < 1:
            raise ValueError(f"rollout.first_device={self.first_device}, devices={self.devices}, replicas="
                             f"{self.replicas}; expected >= 0, >= 0, >= 1")
        if self.devices % self.replicas or (self.replicas > 1 and not self.devices):
            raise ValueError(f"rollout.devices={self.devices} does not split into replicas={self.replicas} engines "
                             f"of equal device sets; expected a positive multiple of {self.replicas}")

    def device_ids(self) -> range:
        """Indices into jax.devices() of the engines' devices (the default device when `devices` is 0)."""
        return range(self.first_device, self.first_device + max(self.devices, 1))

    def engine_meshes(self) -> list:
        """One mesh per data-parallel engine over disjoint contiguous devices (or [None]: an unsharded engine)."""
        if self.devices == 0:
            return [None]
        visible = jax.local_devices()  # this process's (a rollout process of a multi-process job owns its own)
        if self.first_device + self.devices > len(visible):
            raise ValueError(f"rollout.first_device={self.first_device} + devices={self.devices} exceeds the "
                             f"{len(visible)} visible devices")
        per = self.devices // self.replicas
        return [shd.make_mesh(self.mesh, devices=visible[self.first_device + i * per:self.first_device + (i + 1) * per])
                for i in range(self.replicas)]

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
    """Serves reply requests from episode threads on its rollout engines (one per `rc.engine_meshes()`: data-parallel
    replicas on disjoint devices); see the module docstring."""

    sessions = True  # `submit` takes a session key (episode_policy gives each episode one)

    def __init__(self, model_cfg: Any, store: WeightStore, rc: RolloutConfig, stop_id: int,
                 counters: Counters | None = None, engine_factory: Callable | None = None, vocab_limit: int = 0):
        self.model_cfg, self.store, self.rc, self.stop_id = model_cfg, store, rc, stop_id
        self.vocab_limit = vocab_limit  # ids ≥ this are never sampled (0 = all; orchestrator.vocab_limit)
        self.counters = counters or Counters()
        self._engine_factory = engine_factory or _default_engine
        self._engines: list[RolloutEngine] = []
        self._weights: Optional[Weights] = None
        self._sessions: dict[Hashable, tuple[int, int]] = {}  # episode key → (engine index, engine session id)
        self._drafts_seen: dict[tuple[int, str], int] = {}  # engine draft counters already added to `counters`
        self._pending: list[_Request] = []
        self._cond = threading.Condition()
        self._fault: BaseException | None = None
        self._closed: BaseException | None = None
        self._paused = self._parked = False
        self.thread: threading.Thread | None = None

    @property
    def version(self) -> int:
        """Version of the weights the engines hold (−1 before the first request)."""
        return -1 if self._weights is None else self._weights.version

    @property
    def engine(self) -> Optional[RolloutEngine]:
        """The first engine (None before the first request)."""
        return self._engines[0] if self._engines else None

    @property
    def engines(self) -> list[RolloutEngine]:
        """Every engine (empty before the first request)."""
        return list(self._engines)

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

    def pause(self, timeout_s: float = 600.0) -> None:
        """Colocated placement: park the serving thread between engine steps with every engine's page pool freed
        (the trainer takes the devices); requests queue meanwhile. Returns once parked (or the thread is dead)."""
        with self._cond:
            self._paused = True
            self._cond.notify_all()
            t = self.thread
            if t is not None and not self._cond.wait_for(lambda: self._parked or not t.is_alive(), timeout_s):
                raise RuntimeError(f"the rollout worker did not pause within {timeout_s} s")

    def resume(self) -> None:
        """End a `pause`: the engines allocate their pools and serve on (with the newest weights)."""
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def _park(self, stop: threading.Event) -> None:
        """Inside `_cond` while paused: free the engines' pools, wait for `resume` (or stop), allocate them again."""
        for e in self._engines:
            e.suspend()
        self._parked = True
        self._cond.notify_all()
        self._cond.wait_for(lambda: not self._paused or stop.is_set())
        self._parked = False
        for e in self._engines:
            e.resume()

    def serve(self, stop: threading.Event) -> None:
        """Admit requests and step the engines until `stop`; an exception fails every waiting request and ends the
        thread (logged; new engines are built on restart)."""
        while not stop.is_set():
            with self._cond:
                if self._paused:
                    self._park(stop)
                    continue
                self._cond.wait_for(lambda: self._pending or stop.is_set() or self._paused
                                    or any(e.busy for e in self._engines), timeout=0.1)
                if self._paused:
                    continue
            try:
                if self._fault is not None:
                    fault, self._fault = self._fault, None
                    raise fault
                self.step()
            except BaseException as e:  # noqa: BLE001 - every waiting episode gets the error, then we die
                self.counters.add("rollout_worker_deaths")
                self._die(e)
                log.error("rollout worker died: %s: %s", type(e).__name__, e)
                return
        for engine in self._engines:  # stopped: replies still inside the engines would never finish
            engine.fail_all(RuntimeError("the rollout worker stopped"))

    def step(self) -> bool:
        """One serving round (the serving thread's loop body; tests call it directly): the newest weights, the queued
        requests into the engines, one step of every engine; False when no engine had anything to do. An error
        fails the requests this round took."""
        with self._cond:
            batch, self._pending = self._pending, []
        try:
            self._refresh()
            for r in batch:
                self._admit(r)
        except BaseException as e:
            for r in batch:
                if not r.future.done():
                    r.future.set_exception(e)
            raise
        ran = sum(e.step() for e in self._engines) > 0
        if ran:
            self.counters.add("rollout_steps")
            self._count_drafts()
        return ran

    def close(self, error: BaseException) -> None:
        """Refuse new requests with `error` and fail the queued ones and those inside the engines (the loop is
        stopping: nothing will step the engines again)."""
        with self._cond:
            self._closed = error
        self.fail_pending(error)
        for engine in self._engines:
            engine.fail_all(error)

    def fail_pending(self, error: BaseException) -> None:
        """Fail every queued request (the worker is going away)."""
        with self._cond:
            pending, self._pending = self._pending, []
        for r in pending:
            r.future.set_exception(error)

    def _die(self, error: BaseException) -> None:
        """Fail queued requests and the replies inside the engines; drop the engines (a restart rebuilds them)."""
        self.fail_pending(error)
        engines, self._engines, self._weights, self._sessions = self._engines, [], None, {}
        self._drafts_seen = {}
        for engine in engines:
            engine.fail_all(error)

    def _count_drafts(self) -> None:
        """Drafted and accepted MTP tokens since the last count (counters `rollout_drafted`, `rollout_accepted`:
        their ratio between two snapshots is the acceptance under the versions served in between)."""
        for i, engine in enumerate(self._engines):
            for name in ("drafted", "accepted"):
                seen, now = self._drafts_seen.get((i, name), 0), engine.stats[name]
                if now > seen:
                    self.counters.add(f"rollout_{name}", now - seen)
                    self._drafts_seen[(i, name)] = now

    def _refresh(self) -> None:
        """Build the engines on first use; later, swap in the newest published weights between steps (each engine
        reshards them onto its own mesh)."""
        newest = self.store.latest()
        if not self._engines:
            ecfg = self.rc.engine_config()
            self._engines = [self._engine_factory(self.model_cfg, newest, ecfg, mesh)
                             for mesh in self.rc.engine_meshes()]
        elif newest.version != self._weights.version:
            for engine in self._engines:
                engine.update_weights(newest.params, newest.router_state, newest.version)
        else:
            return
        self._weights = newest
        self.counters.add("rollout_weight_updates")

    def _least_loaded(self) -> int:
        """The engine with the fewest replies waiting or running."""
        return min(range(len(self._engines)),
                   key=lambda i: sum(s.reply is not None for s in self._engines[i].sessions.values()))

    def _admit(self, r: _Request) -> None:
        """Hand one request to an engine: its episode's session (context replaced: the common prefix is kept) or a
        one-reply session on the least loaded engine; the engine's Future completes ours."""
        i, sid = self._sessions.get(r.session, (None, None)) if r.session is not None else (None, None)
        if sid is not None and sid in self._engines[i].sessions:
            self._engines[i].set_context(sid, r.prompt)
        else:
            i = self._least_loaded()
            sid = self._engines[i].open(r.prompt)
            if r.session is not None:
                self._sessions[r.session] = (i, sid)
        sp = SamplingParams(temperature=self.rc.temperature, max_tokens=r.max_new_tokens, stop=((self.stop_id,),),
                            seed=self.rc.seed, vocab_limit=self.vocab_limit)
        self.counters.add("rollout_requests")
        done = self._engines[i].reply(sid, sp)
        done.add_done_callback(lambda f, r=r, i=i, sid=sid: self._resolve(r, i, sid, f))

    def _resolve(self, r: _Request, i: int, sid: int, f: Future) -> None:
        """Our Future from the engine's (runs on the serving thread, under the engine's lock)."""
        if f.exception() is not None:
            r.future.set_exception(f.exception())
            return
        c = f.result()
        if r.session is None:
            self._engines[i].end(sid)
        r.future.set_result(Generation(tuple(c.tokens), tuple(c.policy_logprobs), min(c.versions), c.routing,
                                       c.prompt_routing, tuple(c.versions)))


def _default_engine(model_cfg: Any, weights: Weights, ecfg: EngineConfig, mesh=None) -> RolloutEngine:
    """A rollout engine over the published params, on `mesh` (its devices) or unsharded on the default device."""
    return RolloutEngine(model_cfg, weights.params, weights.router_state, ecfg, mesh, version=weights.version)


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
