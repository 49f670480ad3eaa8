"""Evaluator: held-out tasks run with a fixed weight version through the same episode path as training rollouts
(harness, sandboxes, grading in a fresh fork, reward), with nothing trained on the results.

Pass rate, reward and effort are reported overall and per difficulty; sampling is at the rollout temperature, so
a pass rate is the expected pass@1 of the policy the trainer optimises.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from composer2_jax.rl.services.env_worker import EnvWorker
from composer2_jax.rl.services.records import EpisodeRecord, term_stats
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
