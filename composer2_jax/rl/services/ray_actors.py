"""The RL services as Ray actors, for many machines (launch/ray_cluster.sh starts the cluster).

    WeightRegistry   (head)           newest published (version, host params) — rollout actors pull by version
    RolloutActor     (inference nodes) a RolloutWorker: batches concurrent `generate` calls onto its engine and
                                      pulls a newer version from the registry between batches
    EnvActor         (CPU nodes)      an Environment + EnvWorker: runs whole episodes (harness loop, grading,
                                      reward), asking a RolloutActor for each reply

The trainer stays in the driver process (ray_loop.py), on the head node's accelerators. Actors are created with
`max_restarts`, so a killed actor comes back; a restarted RolloutActor pulls the newest weights at start-up.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import jax
import numpy as np
import ray

from composer2_jax.rl.config import RLExperimentConfig
from composer2_jax.rl.services.records import EpisodeRecord
from composer2_jax.rl.services.rollout import Generation, RolloutConfig, RolloutPolicy, RolloutWorker
from composer2_jax.rl.services.routing import episode_routing
from composer2_jax.rl.services.weights import Weights
from composer2_jax.rl.sources import RLTask


def host_weights(weights: Weights) -> Weights:
    """The same version with numpy leaves (what travels through the object store)."""
    return Weights(weights.version, jax.device_get(weights.params), jax.device_get(weights.router_state))


@ray.remote(num_cpus=0)
class WeightRegistry:
    """The newest published weights; versions only increase."""

    def __init__(self):
        self._weights: Weights | None = None

    def publish(self, weights: Weights) -> int:
        """Store a newer version; returns the stored version."""
        if self._weights is None or weights.version > self._weights.version:
            self._weights = weights
        return self._weights.version

    def version(self) -> int:
        """Newest version (−1 before the first)."""
        return -1 if self._weights is None else self._weights.version

    def latest(self) -> Weights:
        """The newest weights."""
        if self._weights is None:
            raise RuntimeError("no weights were published yet")
        return self._weights


class RegistryStore:
    """The WeightStore interface a RolloutWorker reads, backed by the registry actor (pulls only new versions)."""

    def __init__(self, registry):
        self.registry = registry
        self._cached: Weights | None = None

    @property
    def version(self) -> int:
        return ray.get(self.registry.version.remote())

    def latest(self) -> Weights:
        """The newest weights, fetched only when the version changed."""
        if self._cached is None or self.version != self._cached.version:
            self._cached = ray.get(self.registry.latest.remote())
        return self._cached


@ray.remote(num_cpus=0, max_restarts=-1, max_concurrency=256)
class RolloutActor:
    """A RolloutWorker serving concurrent `generate` calls (a threaded actor: calls batch together)."""

    def __init__(self, model_cfg: Any, rc: RolloutConfig, stop_id: int, registry, vocab_limit: int = 0):
        self.worker = RolloutWorker(model_cfg, RegistryStore(registry), rc, stop_id, vocab_limit=vocab_limit)
        self._stop = threading.Event()
        self.worker.start(self._stop)

    def generate(self, prompt: list[int], max_new_tokens: int) -> Generation:
        """One reply (restarting the serving thread if it died)."""
        if self.worker.thread is None or not self.worker.thread.is_alive():
            self.worker.start(self._stop)
        return self.worker.generate(prompt, max_new_tokens)

    def max_prompt(self) -> int:
        return self.worker.max_prompt

    def stats(self) -> dict[str, int]:
        """The worker's counters."""
        return self.worker.counters.snapshot()


@ray.remote(num_cpus=0, max_restarts=-1, max_concurrency=64)
class EnvActor:
    """An Environment and an EnvWorker on this node; `run` plays one episode against a RolloutActor."""

    def __init__(self, run: RLExperimentConfig, num_moe: int, k: int, vocab_limit: int, max_prompt: int):
        from composer2_jax.env import Environment  # noqa: PLC0415 - sandboxes only where an EnvActor runs
        from composer2_jax.rl.services.env_worker import env_worker_for, sandbox_limits  # noqa: PLC0415

        self.env = Environment(pool_size=run.env.pool_size, limits=sandbox_limits(run.env))
        self.worker = env_worker_for(run, self.env, run.tokenizer.build())
        self.num_moe, self.k, self.vocab_limit, self.max_prompt = num_moe, k, vocab_limit, max_prompt

    def run(self, task: RLTask, version: int, rollout) -> EpisodeRecord:
        """One graded episode; every reply is a `rollout.generate` call."""
        policy = RolloutPolicy(lambda p, n: ray.get(rollout.generate.remote(p, n)), self.vocab_limit, self.max_prompt)
        record = self.worker.run(task, policy, version,
                                 lambda ep: episode_routing(ep, policy.calls, self.num_moe, self.k))
        record.routing = [None if r is None else np.ascontiguousarray(r) for r in record.routing]
        return record

    def pid(self) -> int:
        """This actor's process id (tests kill it)."""
        return os.getpid()

    def shutdown(self) -> None:
        """Close every sandbox."""
        self.env.shutdown()
