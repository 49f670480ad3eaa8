"""The RL services as Ray actors, for many machines (launch/ray_cluster.sh starts the cluster).

    WeightRegistry   (head)           newest published (version, host params) — rollout actors pull by version
    RolloutActor     (inference nodes) a RolloutWorker: batches concurrent `generate` calls onto its engine and
                                      pulls a newer version from the registry between batches
    EnvActor         (CPU nodes)      an Environment + EnvWorker: runs whole episodes (harness loop, grading,
                                      reward), asking a RolloutActor for each reply
    EvalActor        (any node)       the evaluator service (evaluator.EvalService) with its own Environment and
                                      engine, pulling due versions from its own registry (RayEvalService feeds it)

The trainer stays in the driver process (ray_loop.py), on the head node's accelerators. Actors are created with
`max_restarts`, so a killed actor comes back; a restarted RolloutActor pulls the newest weights at start-up.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Sequence

import jax
import numpy as np
import ray

from composer2_jax.env.harness import TurnCheckpoint
from composer2_jax.rl.records import Counters, EpisodeRecord
from composer2_jax.rl.run_config import RLExperimentConfig
from composer2_jax.rl.services.rollout import Generation, RolloutConfig, RolloutPolicy, RolloutWorker
from composer2_jax.rl.services.routing import CallRecord, episode_routing
from composer2_jax.rl.services.weight_delta import WeightDelta, apply_delta, encode_delta, full_bytes
from composer2_jax.rl.services.weights import Weights
from composer2_jax.rl.sources import RLTask


def host_weights(weights: Weights) -> Weights:
    """The same version with numpy leaves (what travels through the object store)."""
    return Weights(weights.version, jax.device_get(weights.params), jax.device_get(weights.router_state))


@ray.remote(num_cpus=0)
class WeightRegistry:
    """The newest published weights; versions only increase. With deltas, the newest version also as a delta from
    the one before it (what a reader holding that one fetches instead of the whole)."""

    def __init__(self):
        self._weights: Weights | None = None
        self._delta: WeightDelta | None = None

    def publish(self, weights: Weights) -> int:
        """Store a newer version; returns the stored version."""
        if self._weights is None or weights.version > self._weights.version:
            self._weights, self._delta = weights, None
        return self._weights.version

    def publish_delta(self, delta: WeightDelta) -> int:
        """Apply a delta to the stored version; returns the new version, or −1 when the registry does not hold the
        delta's base (a restarted registry): the publisher then sends the version in full."""
        if self._weights is None or self._weights.version != delta.base_version:
            return -1
        self._weights, self._delta = apply_delta(self._weights, delta), delta
        return self._weights.version

    def delta_from(self, version: int) -> WeightDelta | None:
        """The newest version as a delta from `version`, or None if it was not made from `version`."""
        return self._delta if self._delta is not None and self._delta.base_version == version else None

    def version(self) -> int:
        """Newest version (−1 before the first)."""
        return -1 if self._weights is None else self._weights.version

    def latest(self) -> Weights:
        """The newest weights."""
        if self._weights is None:
            raise RuntimeError("no weights were published yet")
        return self._weights


class RegistryStore:
    """The WeightStore interface a RolloutWorker reads, backed by the registry actor (pulls only new versions; with
    `deltas`, a delta from the version held when the registry has one from it, else the whole version)."""

    def __init__(self, registry, deltas: bool = False, counters: Counters | None = None):
        self.registry, self.deltas = registry, deltas
        self.counters = counters or Counters()  # weight_syncs_full/_delta, weight_bytes_received
        self._cached: Weights | None = None

    @property
    def version(self) -> int:
        return ray.get(self.registry.version.remote())

    def latest(self) -> Weights:
        """The newest weights, fetched only when the version changed."""
        if self._cached is not None and self.version == self._cached.version:
            return self._cached
        delta = ray.get(self.registry.delta_from.remote(self._cached.version)) if self.deltas and self._cached else None
        if delta is not None:
            self._cached = apply_delta(self._cached, delta)
            self.counters.add("weight_syncs_delta")
            self.counters.add("weight_bytes_received", delta.nbytes)
        else:  # the first version, or one missed: the whole of the newest
            self._cached = ray.get(self.registry.latest.remote())
            self.counters.add("weight_syncs_full")
            self.counters.add("weight_bytes_received", full_bytes(self._cached))
        return self._cached


class RegistryPublisher:
    """The trainer side of the object-store path: each version to the registry in full, or (with `deltas`, after
    the first) as a delta from the version published before; counts the bytes sent against the full size."""

    def __init__(self, registry, deltas: bool = False, counters: Counters | None = None):
        self.registry, self.deltas = registry, deltas
        self.counters = counters or Counters()  # weight_bytes_sent, weight_bytes_full
        self._sent: Weights | None = None

    def publish(self, weights: Weights) -> None:
        """Host copies of `weights` to the registry (a delta when it holds the previous version)."""
        host = host_weights(weights)
        full = full_bytes(host)
        sent = -1
        if self.deltas and self._sent is not None:
            delta = encode_delta(self._sent, host)
            if ray.get(self.registry.publish_delta.remote(delta)) == host.version:
                sent = delta.nbytes
        if sent < 0:
            ray.get(self.registry.publish.remote(host))
            sent = full
        self.counters.add("weight_bytes_sent", sent)
        self.counters.add("weight_bytes_full", full)
        self._sent = host


@ray.remote(num_cpus=0, max_restarts=-1, max_concurrency=256)
class RolloutActor:
    """A RolloutWorker serving concurrent `generate` calls (a threaded actor: calls batch together)."""

    def __init__(self, model_cfg: Any, rc: RolloutConfig, stop_id: int, registry, vocab_limit: int = 0,
                 weight_deltas: bool = False, device_sync: int = 0):
        """`device_sync` > 0: this actor is that process of the driver's jax.distributed job (its runtime_env names
        the job, ray_loop.rollout_actor_options) and receives each version device to device from process 0;
        0: it pulls versions from `registry`."""
        counters = Counters()
        if device_sync:
            from composer2_jax.rl.services.device_sync import DeviceWeightReceiver
            from composer2_jax.train import distributed

            distributed.initialize()  # returns once the driver joined too
            store = DeviceWeightReceiver(f"rollout{device_sync}", 0, device_sync)
        else:
            store = RegistryStore(registry, weight_deltas, counters)
        self.worker = RolloutWorker(model_cfg, store, rc, stop_id, counters=counters, vocab_limit=vocab_limit)
        self._stop = threading.Event()
        self.worker.start(self._stop)

    def generate(self, prompt: list[int], max_new_tokens: int) -> Generation:
        """One reply (restarting the serving thread if it died)."""
        if self.worker.thread is None or not self.worker.thread.is_alive():
            self.worker.start(self._stop)
        return self.worker.generate(prompt, max_new_tokens)

    def max_prompt(self) -> int:
        return self.worker.max_prompt

    def leave_job(self) -> None:
        """weight_sync='device', at the end: leave the jax.distributed job (its shutdown barrier needs every
        process, so the driver leaves at the same time)."""
        jax.distributed.shutdown()

    def stats(self) -> dict[str, int]:
        """The worker's counters."""
        return self.worker.counters.snapshot()

    def placement(self) -> dict[str, Any]:
        """This process's id and JAX devices, and each engine's device ids (its own, not the driver's)."""
        return {"pid": os.getpid(), "devices": jax.device_count(), "platform": jax.devices()[0].platform,
                "engines": [[d.id for d in e.devices] for e in self.worker.engines]}

    def engine_weights(self) -> list[tuple[int, Any, list[float]]]:
        """(version, host params, weight-sync seconds) of each engine: what its devices hold, for checks."""
        return [(e.version, jax.device_get(e.params), list(e.sync_s)) for e in self.worker.engines]


RESTART_WAIT_S = 600.0  # how long an episode whose RolloutActor is restarting waits for it before failing


def generate_or_await_restart(rollout, prompt, max_new_tokens: int, wait_s: float = RESTART_WAIT_S):
    """One reply from `rollout`. If the actor died and Ray is restarting it, wait (up to `wait_s`) until it answers
    again, then raise the error: the episode fails and the driver reruns it from its start on a live actor, instead
    of spending its retries on an actor that is still loading its model."""
    try:
        return ray.get(rollout.generate.remote(prompt, max_new_tokens))
    except ray.exceptions.ActorUnavailableError:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                ray.get(rollout.stats.remote(), timeout=10)
                break
            except (ray.exceptions.ActorUnavailableError, ray.exceptions.GetTimeoutError):
                time.sleep(1.0)
        raise


@ray.remote(num_cpus=0, max_restarts=-1, max_concurrency=64)
class EnvActor:
    """An Environment and an EnvWorker on this node; `run` plays one episode against a RolloutActor."""

    def __init__(self, run: RLExperimentConfig, num_moe: int, k: int, vocab_limit: int, max_prompt: int):
        from composer2_jax.env import Environment
        from composer2_jax.rl.services.env_worker import env_worker_for, sandbox_limits

        self.env = Environment(pool_size=run.env.pool_size, limits=sandbox_limits(run.env))
        self.worker = env_worker_for(run, self.env, run.tokenizer.build())
        self.num_moe, self.k, self.vocab_limit, self.max_prompt = num_moe, k, vocab_limit, max_prompt

    def run(self, task: RLTask, version: int, rollout, checkpoint: TurnCheckpoint | None = None,
            checkpoints: bool = False, inherited: Sequence[CallRecord] = ()) -> tuple[EpisodeRecord, list[CallRecord]]:
        """One graded episode, every reply a `rollout.generate` call: (record, the episode's own generate calls).

        Tree groups: `checkpoints` keeps one per turn boundary (their snapshots live in this actor's environment
        until `release`), and `checkpoint`, one of this actor's, resumes an episode from it with `inherited`, the
        calls up to that boundary (router replay of the shared prefix)."""
        policy = RolloutPolicy(lambda p, n: generate_or_await_restart(rollout, p, n), self.vocab_limit, self.max_prompt)
        record = self.worker.run(task, policy, version,
                                 lambda ep: episode_routing(ep, list(inherited) + policy.calls, self.num_moe, self.k),
                                 checkpoint=checkpoint, checkpoints=checkpoints)
        record.routing = [None if r is None else np.ascontiguousarray(r) for r in record.routing]
        return record, (policy.calls if checkpoints else [])

    def release(self, checkpoints: Sequence[TurnCheckpoint]) -> int:
        """Delete the snapshots of these checkpoints (a tree group is done with them); how many it still held."""
        return self.worker.release(checkpoints)

    def pid(self) -> int:
        """This actor's process id (tests kill it)."""
        return os.getpid()

    def shutdown(self) -> None:
        """Close every sandbox."""
        self.env.shutdown()


@ray.remote(num_cpus=0, max_concurrency=4)
class EvalActor:
    """The held-out evaluation as its own actor: an EvalService over its own Environment, pulling from `registry`."""

    def __init__(self, run: RLExperimentConfig, registry, tasks: list, vocab_limit: int, start: int):
        from composer2_jax.data.chat import end_token_id
        from composer2_jax.env import Environment
        from composer2_jax.rl.services.env_worker import env_worker_for, sandbox_limits
        from composer2_jax.rl.services.evaluator import EvalService, Evaluator

        tok = run.tokenizer.build()
        self.env = Environment(pool_size=min(run.env.pool_size, 4), limits=sandbox_limits(run.env))
        evaluator = Evaluator(env_worker_for(run, self.env, tok), tasks, run.model, run.rollout,
                              end_token_id(tok), run.rl.eval_samples, run.rl.episode_threads,
                              vocab_limit=vocab_limit)
        self.service = EvalService(RegistryStore(registry), evaluator.evaluate, run.rl.eval_every, start=start,
                                   on_close=self.env.shutdown)
        self.service.start()

    def results(self) -> list[dict[str, float]]:
        """Every result so far (failed evaluations included, marked eval/failed)."""
        return list(self.service.results)

    def finish(self, final_version: int) -> tuple[list[dict[str, float]], list[str]]:
        """Evaluate the final version too, stop; (every result, failed ones marked eval/failed; errors)."""
        self.service.finish(final_version)
        return list(self.service.results), list(self.service.errors)


class RayEvalService:
    """The driver's handle on an EvalActor, with EvalService's interface (`finish`, `errors`): a driver thread
    copies each due version from the trainer's store to the actor's registry (host arrays) and writes the actor's
    results through `write` as they arrive. The trainer never waits for either."""

    def __init__(self, run: RLExperimentConfig, store, write: Callable[[int, dict], None], tasks: list,
                 start: int = 0, vocab_limit: int = 0):
        self.store, self.write, self.every = store, write, run.rl.eval_every
        self.registry = WeightRegistry.remote()
        self.actor = EvalActor.remote(run, self.registry, tasks, vocab_limit, start)
        self.errors: list[str] = []
        self._next, self._written = -(-start // self.every) * self.every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="eval-feeder", daemon=True)
        self._thread.start()

    def _feed(self, final: bool = False) -> None:
        """Publish the newest version to the actor's registry if it is due (or final)."""
        version = self.store.version
        if version >= 0 and (version >= self._next or final):
            ray.get(self.registry.publish.remote(host_weights(self.store.latest())))
            self._next = (version // self.every + 1) * self.every

    def _drain(self, results: list[dict]) -> None:
        """Write the results not written yet."""
        for m in results[self._written:]:
            if "eval/failed" not in m:
                self.write(int(m["eval/version"]), m)
        self._written = len(results)

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            self._feed()
            self._drain(ray.get(self.actor.results.remote()))

    def finish(self, final_version: int, timeout_s: float | None = None) -> list[dict[str, float]]:
        """Hand the actor the final version, wait for its evaluations, write them, release the actors."""
        self._stop.set()
        self._thread.join()
        self._feed(final=True)
        results, self.errors = ray.get(self.actor.finish.remote(final_version), timeout=timeout_s)
        self._drain(results)
        for actor in (self.actor, self.registry):
            ray.kill(actor)
        return [m for m in results if "eval/failed" not in m]
