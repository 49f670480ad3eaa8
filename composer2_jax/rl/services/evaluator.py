"""Evaluator: held-out tasks run with a fixed weight version through the same episode path as training rollouts
(harness, sandboxes, grading in a fresh fork, reward), with nothing trained on the results.

Pass rate, reward and effort are reported overall and per difficulty; sampling is at the rollout temperature, so
a pass rate is the expected pass@1 of the policy the trainer optimises.

`EvalService` makes evaluation its own service: a worker (a thread in the embedded backend, the same loop in its
own Ray actor under Ray: ray_actors.EvalActor) that pulls published versions from a weight store and evaluates every
`every`-th one with its own environment and engine. The trainer only publishes; it never waits for an evaluation
(when evaluations are slower than versions, the worker skips to the newest due version).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np

from composer2_jax.rl.records import EpisodeRecord, term_stats
from composer2_jax.rl.services.env_worker import EnvWorker
from composer2_jax.rl.services.rollout import RolloutConfig, RolloutWorker, episode_policy
from composer2_jax.rl.services.weights import Weights, WeightStore
from composer2_jax.rl.sources import RLTask

log = logging.getLogger(__name__)


class Evaluator:
    """`evaluate(weights)` → metrics of the held-out tasks (each run `samples` times)."""

    def __init__(self, env_worker: EnvWorker, tasks: Sequence[RLTask], model_cfg: Any, rc: RolloutConfig,
                 stop_id: int, samples: int = 1, threads: int = 16, vocab_limit: int = 0):
        if not tasks or samples < 1:
            raise ValueError(f"the evaluator needs tasks and samples ≥ 1; got {len(tasks)} tasks, samples={samples}")
        self.env_worker, self.tasks, self.model_cfg, self.rc = env_worker, list(tasks), model_cfg, rc
        self.stop_id, self.samples, self.threads, self.vocab_limit = stop_id, samples, threads, vocab_limit

    def episodes(self, weights: Weights) -> list[EpisodeRecord | None]:
        """One record per (task, sample) in order; None where the episode failed."""
        rollout = RolloutWorker(self.model_cfg, WeightStore(weights),
                                dataclasses.replace(self.rc, seed=self.rc.seed + 7919 * (weights.version + 1)),
                                self.stop_id, vocab_limit=self.vocab_limit)
        stop = threading.Event()
        rollout.start(stop)

        def one(task: RLTask) -> EpisodeRecord | None:
            try:
                return self.env_worker.run(task, episode_policy(rollout, self.env_worker.tok.vocab_size),
                                           weights.version)
            except Exception as e:  # noqa: BLE001 - a failed evaluation episode counts as a failure
                log.warning("evaluation episode of %s failed: %s: %s", task.task_id, type(e).__name__, e)
                return None

        jobs = [t for t in self.tasks for _ in range(self.samples)]
        try:
            with ThreadPoolExecutor(self.threads, thread_name_prefix="eval") as pool:
                return list(pool.map(one, jobs))
        finally:
            stop.set()
            rollout.close(RuntimeError("evaluation finished"))

    def evaluate(self, weights: Weights, prefix: str = "eval/") -> dict[str, float]:
        """Pass rate, reward, effort and turns overall and per difficulty (failed episodes score 0)."""
        jobs = [t for t in self.tasks for _ in range(self.samples)]
        records = self.episodes(weights)
        return eval_metrics(jobs, records, prefix) | {f"{prefix}version": float(weights.version)}


def eval_metrics(tasks: Sequence[RLTask], records: Sequence[EpisodeRecord | None], prefix: str = "eval/"
                 ) -> dict[str, float]:
    """Aggregate evaluation records (None = a failed episode: success 0, no effort)."""
    out = {f"{prefix}episodes": float(len(records)), f"{prefix}errors": float(sum(r is None for r in records))}
    groups = {"": list(zip(tasks, records))}
    for diff in sorted({t.difficulty for t in tasks}):
        groups[f"/{diff}"] = [(t, r) for t, r in zip(tasks, records) if t.difficulty == diff]
    if len({t.source for t in tasks}) > 1:
        for source in sorted({t.source for t in tasks}):
            groups[f"/source/{source}"] = [(t, r) for t, r in zip(tasks, records) if t.source == source]
    for suffix, pairs in groups.items():
        done = [r for _, r in pairs if r is not None]
        out[f"{prefix}pass_rate{suffix}"] = float(np.mean([r.success if r else 0.0 for _, r in pairs]))
        if done:
            out[f"{prefix}reward{suffix}"] = float(np.mean([r.reward for r in done]))
            out[f"{prefix}effort{suffix}"] = float(np.mean([r.effort for r in done]))
            out[f"{prefix}turns{suffix}"] = float(np.mean([r.turns for r in done]))
            out[f"{prefix}tool_calls{suffix}"] = float(np.mean([r.tool_calls for r in done]))
    done = [r for r in records if r is not None]
    if done:
        out.update({prefix + k: v for k, v in term_stats(done).items()})
    return out


class EvalService:
    """A worker that evaluates published versions as they appear, off the trainer's path.

    `evaluate(weights) -> metrics` runs on the worker's thread (in the embedded backend: an Evaluator over its own
    Environment); `on_result(metrics)` receives each result there. Versions due: every multiple of `every` from
    `start` on (the newest published one when the worker falls behind), and whatever `finish` asks for last.
    """

    def __init__(self, store: Any, evaluate: Callable[[Weights], dict[str, float]], every: int,
                 on_result: Callable[[dict[str, float]], None] | None = None, start: int = 0,
                 on_close: Callable[[], None] | None = None):
        if every < 1:
            raise ValueError(f"EvalService every={every}; expected >= 1 (versions between evaluations)")
        self.store, self._evaluate, self.every, self.on_result = store, evaluate, every, on_result
        self.on_close = on_close  # releases what the service owns (its environment) once it has stopped
        self.results: list[dict[str, float]] = []
        self.errors: list[str] = []
        self.busy = threading.Event()  # set while an evaluation runs
        self._next = -(-start // every) * every  # the first due version
        self._stop = threading.Event()
        self._final: int | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> threading.Thread:
        """Start the worker thread."""
        self._thread = threading.Thread(target=self._loop, name="evaluator", daemon=True)
        self._thread.start()
        return self._thread

    def _due(self) -> Weights | None:
        """The newest published weights if a due version is out, else None."""
        if self.store.version < 0:
            return None
        weights = self.store.latest()
        due = weights.version >= self._next or (self._final is not None and weights.version >= self._final)
        done = {int(r["eval/version"]) for r in self.results}
        return weights if due and weights.version not in done else None

    def _loop(self) -> None:
        while True:
            weights = self._due()
            if weights is None:  # (a failed evaluation counts as done: its result is marked eval/failed)
                final_done = self._final is not None and self._final in {int(r["eval/version"]) for r in self.results}
                if self._stop.is_set() and (self._final is None or final_done):
                    return
                self._stop.wait(0.05)
                continue
            self.busy.set()
            try:
                m = self._evaluate(weights) | {"eval/version": float(weights.version)}
                self.results.append(m)
                if self.on_result is not None:
                    self.on_result(m)
            except Exception as e:  # noqa: BLE001 - a failed evaluation is reported, never fatal to training
                self.errors.append(f"version {weights.version}: {type(e).__name__}: {e}")
                log.warning("evaluation of version %d failed: %s: %s", weights.version, type(e).__name__, e)
                self.results.append({"eval/version": float(weights.version), "eval/failed": 1.0})
            finally:
                self.busy.clear()
            self._next = (weights.version // self.every + 1) * self.every

    def finish(self, final_version: int | None = None, timeout_s: float | None = None) -> list[dict[str, float]]:
        """After training: evaluate `final_version` too (if given and not yet done), stop, and return the results."""
        self._final = final_version
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self.on_close is not None:
            self.on_close()
        return [r for r in self.results if "eval/failed" not in r]
