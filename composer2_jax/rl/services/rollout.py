"""Rollout worker: the inference engine serving many concurrent episodes, with weight updates between batches.

Episode threads (the environment workers' harness loops) `submit` one reply request each; the serving loop
gathers up to `batch_size` requests, picks up the newest published weights if there are any, and runs one
fixed-shape `Engine` call. Every reply carries the sampler's behaviour log-probs μ (`policy_logprobs`), the routing
of every forward position (router replay) and the weight version that produced it. Because weights change only
between batches and each reply records its version, an episode is a partial rollout: it may run turn 1 on version
t and turn 2 on t + 1, and the trainer sees the version of each turn.

Fixed shapes: every call is [batch_size, prompt_len] with max_new_tokens new tokens (spare rows are inert), so the
generate program compiles once. A prompt longer than prompt_len is an error naming both numbers.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable

import jax
import numpy as np

from composer2_jax.env.harness import Completion as HarnessCompletion
from composer2_jax.infer import Engine, SamplingParams
from composer2_jax.rl.services.records import Counters
from composer2_jax.rl.services.routing import CallRecord
from composer2_jax.rl.services.weights import Weights, WeightStore

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class RolloutConfig:
    """Shapes and sampling of the rollout engine."""

    batch_size: int = 16  # rows per generate call (requests beyond it wait for the next call)
    prompt_len: int = 512  # prompts are right-padded to this many tokens (the longest context allowed)
    max_new_tokens: int = 200  # new tokens per reply (the harness's max_new_tokens must not exceed it)
    temperature: float = 1.0  # sampling temperature (the trainer's π_θ uses the same)
    batch_wait_s: float = 0.02  # wait this long for more requests before running a partial batch
    seed: int = 0  # base of the per-call sampling seeds

    def __post_init__(self):
        if min(self.batch_size, self.prompt_len, self.max_new_tokens) < 1 or self.temperature <= 0:
            raise ValueError(f"RolloutConfig {self}: sizes must be ≥ 1 and temperature > 0")


@dataclasses.dataclass(frozen=True)
class Generation:
    """One reply: sampled ids, log μ per id, the weight version, and the routing record."""

    ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    version: int
    routing: np.ndarray | None  # [n, L_moe, k]
    prompt_routing: np.ndarray | None  # [P−1, L_moe, k]


@dataclasses.dataclass
class _Request:
    prompt: list[int]
    max_new_tokens: int
    future: Future


class RolloutWorker:
    """Batches reply requests from episode threads onto one engine; see the module docstring."""

    def __init__(self, model_cfg: Any, store: WeightStore, rc: RolloutConfig, stop_id: int,
                 counters: Counters | None = None, engine_factory: Callable | None = None, vocab_limit: int = 0):
        self.model_cfg, self.store, self.rc, self.stop_id = model_cfg, store, rc, stop_id
        self.vocab_limit = vocab_limit  # ids ≥ this are never sampled (0 = all; orchestrator.vocab_limit)
        self.counters = counters or Counters()
        self._engine_factory = engine_factory or _default_engine
        self._engine, self._weights = None, None
        self._pending: list[_Request] = []
        self._cond = threading.Condition()
        self._calls = 0
        self._fault: BaseException | None = None
        self._closed: BaseException | None = None
        self.thread: threading.Thread | None = None

    @property
    def version(self) -> int:
        """Version of the weights the engine holds (−1 before the first batch)."""
        return -1 if self._weights is None else self._weights.version

    def submit(self, prompt: list[int], max_new_tokens: int) -> Future:
        """Queue one reply request; the Future resolves to a Generation (or the error of its batch)."""
        if max_new_tokens > self.rc.max_new_tokens or len(prompt) > self.rc.prompt_len:
            raise ValueError(f"request of {len(prompt)} prompt + {max_new_tokens} new tokens exceeds the rollout's "
                             f"prompt_len={self.rc.prompt_len} / max_new_tokens={self.rc.max_new_tokens}")
        fut: Future = Future()
        with self._cond:
            if self._closed is not None:
                raise self._closed
            self._pending.append(_Request(list(prompt), max_new_tokens, fut))
            self._cond.notify_all()
        return fut

    def generate(self, prompt: list[int], max_new_tokens: int) -> Generation:
        """Blocking `submit`."""
        return self.submit(prompt, max_new_tokens).result()

    def inject_fault(self, error: BaseException) -> None:
        """Make the serving thread die with `error` at its next batch (fault-tolerance tests)."""
        self._fault = error

    def start(self, stop: threading.Event) -> threading.Thread:
        """Run `serve` on a daemon thread."""
        self.thread = threading.Thread(target=self.serve, args=(stop,), name="rollout", daemon=True)
        self.thread.start()
        return self.thread

    @property
    def max_prompt(self) -> int:
        """The longest prompt the fixed-shape engine takes."""
        return self.rc.prompt_len

    def serve(self, stop: threading.Event) -> None:
        """Serve batches until `stop`; an exception fails the batch's requests and ends the thread (logged)."""
        while not stop.is_set():
            batch = self._next_batch(stop)
            if not batch:
                continue
            try:
                if self._fault is not None:
                    fault, self._fault = self._fault, None
                    raise fault
                self._run(batch)
            except BaseException as e:  # noqa: BLE001 - every waiting episode gets the error, then we die
                for r in batch:
                    if not r.future.done():
                        r.future.set_exception(e)
                self.counters.add("rollout_worker_deaths")
                self.fail_pending(e)
                log.error("rollout worker died: %s: %s", type(e).__name__, e)
                return

    def close(self, error: BaseException) -> None:
        """Refuse new requests with `error` and fail the queued ones (the loop is stopping)."""
        with self._cond:
            self._closed = error
        self.fail_pending(error)

    def fail_pending(self, error: BaseException) -> None:
        """Fail every queued request (the worker is going away)."""
        with self._cond:
            pending, self._pending = self._pending, []
        for r in pending:
            r.future.set_exception(error)

    def _next_batch(self, stop: threading.Event) -> list[_Request]:
        """Up to batch_size requests, after waiting batch_wait_s for company once the first arrives."""
        with self._cond:
            self._cond.wait_for(lambda: self._pending or stop.is_set(), timeout=0.1)
            if not self._pending:
                return []
        if len(self._pending) < self.rc.batch_size:
            time.sleep(self.rc.batch_wait_s)
        with self._cond:
            batch, self._pending = self._pending[:self.rc.batch_size], self._pending[self.rc.batch_size:]
        return batch

    def _refresh(self) -> None:
        """Swap in the newest published weights (between batches only)."""
        newest = self.store.latest()
        if self._weights is None or newest.version != self._weights.version:
            self._engine = self._engine_factory(self.model_cfg, newest)
            self._weights = newest
            self.counters.add("rollout_weight_updates")

    def _run(self, batch: list[_Request]) -> None:
        """One engine call; each request gets its Generation."""
        self._refresh()
        version = self._weights.version
        sp = SamplingParams(temperature=self.rc.temperature, max_tokens=self.rc.max_new_tokens,
                            stop=((self.stop_id,),), seed=self.rc.seed + self._calls,
                            vocab_limit=self.vocab_limit)
        self._calls += 1
        outs = self._engine.generate([r.prompt for r in batch], sp, shape=(self.rc.batch_size, self.rc.prompt_len))
        self.counters.add("rollout_batches")
        self.counters.add("rollout_requests", len(batch))
        for r, out in zip(batch, outs):
            n = r.max_new_tokens
            routing = None if out.routing is None else out.routing[:n]
            r.future.set_result(Generation(tuple(out.tokens[:n]), tuple(out.policy_logprobs[:n]), version, routing,
                                           out.prompt_routing))


def _default_engine(model_cfg: Any, weights: Weights) -> Any:
    """An Engine over the published params (single device)."""
    return Engine(model_cfg, weights.params, weights.router_state)


class RolloutPolicy:
    """Harness Policy for one episode: forwards replies to a generate function and keeps their routing records.

    Two degenerate cases end the reply instead of failing the episode, so they still earn their (zero) reward:
    a context longer than `max_prompt` gets an empty reply (the harness then stops: no tool call), counted in
    `overflows`; an id the tokenizer cannot decode (a model vocabulary larger than the tokenizer's) cuts the reply
    before it (the kept prefix is still an exact sample with its own log μ), counted in `truncated`.
    """

    def __init__(self, generate: Callable[[list[int], int], Generation], vocab_limit: int | None = None,
                 max_prompt: int | None = None):
        self._generate, self.vocab_limit, self.max_prompt = generate, vocab_limit, max_prompt
        self.calls: list[CallRecord] = []
        self.versions: list[int] = []
        self.truncated = self.overflows = 0

    def generate(self, prompt_ids, max_new_tokens: int) -> HarnessCompletion:
        """One reply with log μ and the version that sampled it."""
        if self.max_prompt is not None and len(prompt_ids) > self.max_prompt:
            self.overflows += 1
            return HarnessCompletion((), (), max(self.versions, default=0))
        g = self._generate(list(prompt_ids), int(max_new_tokens))
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
    """A RolloutPolicy over a rollout worker (its prompt limit, if it has one)."""
    return RolloutPolicy(rollout.generate, vocab_limit, getattr(rollout, "max_prompt", None))
