"""The embedded orchestrator: every service in one process (threads + queues + JAX), for a single machine.

    dispatcher thread ── admits a group when the staleness gate allows (≤ (v + η + 1)·G admitted) ──┐
    episode threads (env workers) ── harness loop: RolloutPolicy ⇄ sandbox tools; grade; reward ──┤ groups
    rollout thread ── batches reply requests onto the engines; picks up new weights between steps  │
    trainer (caller's thread) ── takes G fresh groups ← GroupBuffer ←──────────────────────────────┘
                                 → update → publish version t+1 → checkpoint / evaluate / log

Placement (`rl.placement`): shared and disaggregated run rollouts while the trainer trains (disaggregated: on
disjoint devices, each engine resharding published weights onto its mesh); colocated pauses the rollout worker
(engine pools freed) and brings the optimizer state back from host memory for each update, then offloads it and
resumes the rollouts, whose episodes in flight continue under the new version.

Tree groups (`rl.group_mode="tree"`, rl/branching.py): a group is one job that grows a tree, its episodes and branches
running on a second pool through the same rollout worker and the same retries; the group is admitted, gated and
buffered like a plain one, its episodes are its leaves, and each branch's routing record starts with the calls it
inherited from the episode it branched from.

Faults: an episode whose sandbox or rollout call fails is retried (`max_retries`) in a fresh fork, then dropped
and counted; a group left with fewer than `min_group` episodes is dropped and its admission slot released, so
the trainer never waits for it. A dead rollout thread is restarted by a watchdog (its in-flight requests fail
and their episodes are retried).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np

from composer2_jax.env.harness import TurnCheckpoint
from composer2_jax.rl.branching import Branch, grow_tree
from composer2_jax.rl.curriculum import Curriculum
from composer2_jax.rl.records import Counters, EpisodeRecord, GroupRecord
from composer2_jax.rl.run_config import RLConfig
from composer2_jax.rl.services.buffer import GroupBuffer
from composer2_jax.rl.services.env_worker import EnvWorker
from composer2_jax.rl.services.rollout import RolloutPolicy, RolloutWorker, episode_policy
from composer2_jax.rl.services.routing import CallRecord, episode_routing
from composer2_jax.rl.services.staleness import StalenessGate
from composer2_jax.rl.services.trainer import Trainer
from composer2_jax.rl.services.weights import WeightStore

log = logging.getLogger(__name__)


class _PendingGroup:
    """Collects the episodes of one admitted group as they finish."""

    def __init__(self, index: int, task, version: int, n: int, on_done: Callable[["_PendingGroup"], None]):
        self.index, self.task, self.version, self.n, self.on_done = index, task, version, n, on_done
        self.records: list[EpisodeRecord] = []
        self.finished = 0
        self._lock = threading.Lock()

    def add(self, record: EpisodeRecord | None) -> None:
        """One episode finished (None: dropped)."""
        with self._lock:
            self.finished += 1
            if record is not None:
                self.records.append(record)
            done = self.finished == self.n
        if done:
            self.on_done(self)


class _Dropped(RuntimeError):
    """An episode of a tree group was dropped after its retries (the group is dropped)."""


class _CallsAt:
    """Thread-safe map: checkpoint snapshot id -> the generate calls up to that boundary (router replay of branches)."""

    def __init__(self):
        self._calls: dict[str, list[CallRecord]] = {}
        self._lock = threading.Lock()

    def put(self, snapshot: str, calls: list[CallRecord]) -> None:
        with self._lock:
            self._calls[snapshot] = calls

    def calls_of(self, snapshot: str) -> list[CallRecord]:
        """The calls of a snapshot (kept: a boundary may be branched from again)."""
        with self._lock:
            return list(self._calls.get(snapshot, ()))

    def discard(self, snapshot: str) -> None:
        with self._lock:
            self._calls.pop(snapshot, None)


class _DropStreak:
    """Episodes dropped since the last success; at `limit` in a row the run is hopeless (every sandbox or rollout
    call fails the same way), and `fatal` says why instead of the trainer waiting out its timeout."""

    def __init__(self, limit: int):
        self.limit, self.count, self.fatal = limit, 0, None
        self._lock = threading.Lock()

    def success(self) -> None:
        with self._lock:
            self.count = 0

    def dropped(self, task_id: str, error: BaseException | None) -> bool:
        """Count one drop; True (and `fatal` set) once the streak reaches the limit."""
        with self._lock:
            self.count += 1
            if self.count >= self.limit and self.fatal is None:
                self.fatal = (f"{self.count} episodes dropped in a row with no success between them "
                              f"(rl.loop.max_dropped_in_a_row={self.limit}); the last, of {task_id}: "
                              f"{type(error).__name__}: {error}")
            return self.fatal is not None

    def crashed(self, where: str, error: BaseException) -> None:
        """A job of the loop itself raised (a bug, not a worker failure): the run stops with it as `fatal`."""
        with self._lock:
            if self.fatal is None:
                self.fatal = f"{where} raised {type(error).__name__}: {error}"


class LocalOrchestrator:
    """Runs the RL loop in this process; `run(on_version)` trains until version `rl.steps`."""

    def __init__(self, trainer: Trainer, rollout: RolloutWorker, env_worker: EnvWorker, curriculum: Curriculum,
                 rl: RLConfig, store: WeightStore, counters: Counters):
        self.trainer, self.rollout, self.env_worker, self.curriculum = trainer, rollout, env_worker, curriculum
        self.rl, self.lc, self.store, self.counters = rl, rl.loop, store, counters
        g = rl.groups_per_batch
        self.gate = StalenessGate(rl.eta, g, admitted=trainer.version * g)
        self.buffer = GroupBuffer(self.gate, counters)
        self.stop = threading.Event()
        self._pool: ThreadPoolExecutor | None = None
        self._branch_pool: ThreadPoolExecutor | None = None  # tree groups: their episodes (the groups run on _pool)
        self._calls_at = _CallsAt()  # tree groups: checkpoint snapshot -> the calls its branches inherit
        self._drops = _DropStreak(self.lc.max_dropped_in_a_row)
        self._drafts_seen = (0, 0)  # counters (rollout_drafted, rollout_accepted) at the last publication

    # ------------------------------------------------------------------------------------------------ episodes

    def _routing_fn(self, policy: RolloutPolicy, inherited: Sequence[CallRecord] = ()):
        """Episode → per-segment routing records from the calls it inherited (branches) and the policy's own."""
        cfg = self.trainer.model_cfg
        return lambda ep: episode_routing(ep, list(inherited) + policy.calls, self.trainer.num_moe,
                                          cfg.num_experts_per_tok)

    def execute(self, task, version: int, checkpoint: TurnCheckpoint | None = None) -> EpisodeRecord:
        """One attempt at an episode (raises when a worker fails); here: the env worker in this process.

        Tree groups: checkpoints on, and `checkpoint` (if given) is the boundary the episode resumes from."""
        policy = episode_policy(self.rollout, self.env_worker.tok.vocab_size)
        tree = self.rl.group_mode == "tree"
        inherited = self.inherited_calls(checkpoint)
        record = self.env_worker.run(task, policy, version, self._routing_fn(policy, inherited),
                                     checkpoint=checkpoint, checkpoints=tree)
        if tree:
            self.remember_calls(record, list(inherited) + policy.calls)
        self.counters.add("replies_cut_at_unknown_id", policy.truncated)
        self.counters.add("context_overflows", policy.overflows)
        return record

    def inherited_calls(self, checkpoint: TurnCheckpoint | None) -> list[CallRecord]:
        """Tree groups: the generate calls up to a checkpoint's boundary (none from the task's start)."""
        return [] if checkpoint is None else self._calls_at.calls_of(checkpoint.snapshot)

    def remember_calls(self, record: EpisodeRecord, calls: Sequence[CallRecord]) -> None:
        """Tree groups: keep each of the record's boundaries' calls (inherited + its own) for the branches that will
        resume from it; one call per reply, so a boundary after turn k inherits the first k."""
        for ckpt in record.harness.checkpoints:
            self._calls_at.put(ckpt.snapshot, list(calls[:ckpt.turn]))
        self.counters.add("tree_checkpoints", len(record.harness.checkpoints))

    def release_checkpoints(self, checkpoints: Sequence[TurnCheckpoint]) -> None:
        """Tree groups: delete the snapshots of a finished group's checkpoints (counted: `tree_snapshots_released`)
        and forget their calls."""
        self.counters.add("tree_snapshots_released", self.env_worker.release(checkpoints))
        self.forget_calls(checkpoints)

    def forget_calls(self, checkpoints: Sequence[TurnCheckpoint]) -> None:
        """Forget the calls kept for these checkpoints' branches."""
        for c in checkpoints:
            self._calls_at.discard(c.snapshot)

    def run_episode(self, task, version: int, checkpoint: TurnCheckpoint | None = None) -> EpisodeRecord | None:
        """One episode with retries; None (counted) when every attempt failed."""
        last = None
        for attempt in range(1 + self.lc.max_retries):
            if self.stop.is_set():
                return None
            try:
                record = self.execute(task, version, checkpoint)
                self.counters.add("episodes_done")
                self._drops.success()
                return record
            except Exception as e:  # noqa: BLE001 - any failure of a worker is retried or dropped, never fatal
                if self.stop.is_set():  # cut short by the loop's own stop (its sandboxes closing): not a failure
                    self.counters.add("episodes_cut_at_stop")
                    return None
                self.counters.add("episode_failures")
                log.warning("episode of %s failed (attempt %d): %s: %s", task.task_id, attempt + 1,
                            type(e).__name__, e)
                last = e
                if attempt < self.lc.max_retries:
                    self.counters.add("episodes_retried")
                    self._await_rollout()
        self.counters.add("episodes_dropped")
        if self._drops.dropped(task.task_id, last):  # only failures since the last success: stop the run
            self.stop.set()
            self.gate.notify()
        return None

    def _group_done(self, group: _PendingGroup) -> None:
        """Hand a finished group to the buffer, or drop it (and return its slot)."""
        if len(group.records) < self.lc.min_group:
            self.counters.add("groups_dropped")
            self.gate.release()
            return
        self.buffer.put(GroupRecord(group.index, group.task.task_id, group.version, group.records))

    def _dispatch(self) -> None:
        """Admit groups while the staleness gate allows; each becomes `samples` episode jobs (or one tree job)."""
        while not self.stop.is_set():
            index = self.gate.admit(lambda: self.store.version, self.stop)
            if index is None:
                return
            task, version = self.curriculum.next(), self.store.version
            self.counters.add("groups_admitted")
            if self.rl.group_mode == "tree":
                self._pool.submit(self._tree_job, index, task, version)
                continue
            group = _PendingGroup(index, task, version, self.rl.samples, self._group_done)
            for _ in range(self.rl.samples):
                self._pool.submit(self._episode_job, group)

    def _tree_job(self, index: int, task, version: int) -> None:
        """One tree group (a thread-pool job); an exception past its own handling stops the run (`_crashed`)."""
        try:
            self._grow_group(index, task, version)
        except Exception as e:  # noqa: BLE001 - a worker's failure drops the group in _grow_group; this is a bug
            self._crashed(f"the tree job of group {index} ({task.task_id})", e)

    def _grow_group(self, index: int, task, version: int) -> None:
        """Grow one tree group (rl/branching.py) and hand it to the buffer, or drop it when an episode was dropped
        (every worker failure reaches it that way: run_episode retries, then drops) or the loop is stopping; any other
        exception is the tree code's own and is raised after the group's slot is returned."""
        records: list[EpisodeRecord] = []
        lock = threading.Lock()

        def run(ckpt: TurnCheckpoint | None) -> Branch:
            record = self.run_episode(task, version, ckpt)
            if record is None:
                raise _Dropped(f"an episode of tree group {index} was dropped")
            with lock:
                records.append(record)
            return Branch(record.harness, record.reward, payload=record)

        try:
            rng = np.random.default_rng([self.rl.task_seed, index])
            group = grow_tree(run, self.rl.tree, rng, self._branch_pool)
        except Exception as e:  # a failed tree is dropped and its admission slot returned
            self.counters.add("groups_dropped")
            self.gate.release()
            if isinstance(e, _Dropped) or self.stop.is_set():
                return
            raise
        finally:
            self.release_checkpoints([c for r in records for c in r.harness.checkpoints])
        self.counters.add("tree_branches", len(group.branches) - self.rl.tree.initial)
        self.counters.add("tree_generated_tokens", group.generated_tokens)
        self.buffer.put(GroupRecord(index, task.task_id, version, [b.payload for b in group.branches],
                                    tree=group.tree, group_relative=self.rl.tree.group_relative))

    def _episode_job(self, group: _PendingGroup) -> None:
        """One episode of a group (a thread-pool job)."""
        try:
            group.add(self.run_episode(group.task, group.version))
        except Exception as e:  # noqa: BLE001 - run_episode catches worker failures; this is the loop's own bug
            self._crashed(f"the episode job of {group.task.task_id}", e)

    def _crashed(self, where: str, error: BaseException) -> None:
        """A pool job raised past its own handling: stop the run with the error (the trainer raises it) instead of
        leaving its group unfinished and the trainer waiting out `take_timeout_s`."""
        log.exception("%s raised", where)
        self._drops.crashed(where, error)
        self.stop.set()
        self.gate.notify()

    def _await_rollout(self, timeout_s: float = 30.0) -> None:
        """Before a retry: wait (bounded) while the rollout thread is dead, so that a retry is not spent on a worker
        the watchdog is about to restart (a loaded host once burned all three attempts of one episode that way)."""
        deadline = time.monotonic() + timeout_s
        while self._rollout_dead() and not self.stop.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)

    def _rollout_dead(self) -> bool:
        """Whether the rollout thread was started and has died (the watchdog restarts it). Overridden where the
        rollout is not a thread of this process (ray_loop.py)."""
        return self.rollout.thread is not None and not self.rollout.thread.is_alive()

    def _watch_rollout(self) -> None:
        """Restart the rollout thread if it died."""
        while not self.stop.wait(0.05):
            if self._rollout_dead():
                self.counters.add("rollout_restarts")
                log.warning("rollout worker died; restarting it")
                self.rollout.start(self.stop)

    # ------------------------------------------------------------------------------------------------ services

    def publish(self) -> None:
        """Make the trainer's current weights the newest version for the rollout workers."""
        self.store.publish(self.trainer.weights())

    def draft_counts(self) -> tuple[int, int]:
        """(drafted, accepted) MTP tokens of the rollout worker so far (counters `rollout_drafted`, `…_accepted`)."""
        now = self.counters.snapshot()
        return now.get("rollout_drafted", 0), now.get("rollout_accepted", 0)

    def draft_metrics(self) -> dict[str, float]:
        """MTP drafts since the previous publication: `rollout/drafted` and `rollout/acceptance` (accepted / drafted;
        absent when nothing was drafted). The engines decode with the newest weights (picked up between engine
        steps), so the window between publishing versions t − 1 and t is the acceptance of version t − 1's heads."""
        drafted, accepted = self.draft_counts()
        d, a = drafted - self._drafts_seen[0], accepted - self._drafts_seen[1]
        self._drafts_seen = (drafted, accepted)
        out = {"rollout/drafted": float(d)}
        if d:
            out["rollout/acceptance"] = a / d
        return out

    def start_services(self) -> list[threading.Thread]:
        """Start the rollout thread and its watchdog."""
        watchdog = threading.Thread(target=self._watch_rollout, name="watchdog", daemon=True)
        threads = [self.rollout.start(self.stop), watchdog]
        watchdog.start()
        return threads

    def stop_services(self) -> None:
        """Fail what the rollout worker still holds (the loop is over)."""
        self.rollout.close(RuntimeError("the RL loop stopped"))

    # ------------------------------------------------------------------------------------------------ the loop

    def run(self, on_version: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
        """Train until version rl.steps; `on_version(metrics)` after each publication (log, checkpoint, eval)."""
        self.publish()
        self.draft_metrics()  # counters restored on resume: the first window starts here
        if self.rl.placement == "colocated":  # rollouts first: the optimizer state waits in host memory
            self.trainer.offload_optimizer()
        self._pool = ThreadPoolExecutor(self.lc.episode_threads, thread_name_prefix="episode")
        self._branch_pool = ThreadPoolExecutor(self.lc.episode_threads, thread_name_prefix="branch")
        threads = self.start_services() + [threading.Thread(target=self._dispatch, name="dispatch", daemon=True)]
        threads[-1].start()
        history = []
        try:
            while self.trainer.version < self.rl.steps:
                history.append(self._one_version(on_version))
        finally:
            self.stop.set()
            self.gate.notify()
            self.stop_services()
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._branch_pool.shutdown(wait=True, cancel_futures=True)
            for t in threads:
                t.join(timeout=10)
            if self.rl.placement == "colocated":
                self.trainer.reload_optimizer()  # the final checkpoint saves it from the devices
        return history

    def _one_version(self, on_version) -> dict[str, Any]:
        """Take a batch, train, publish, report."""
        t0 = time.monotonic()
        groups = self.buffer.take(self.rl.groups_per_batch, self.trainer.version, self.stop,
                                  self.lc.take_timeout_s)
        if groups is None and self._drops.fatal is not None:
            raise RuntimeError(self._drops.fatal)
        if groups is None:
            raise RuntimeError(f"no batch of {self.rl.groups_per_batch} groups within "
                               f"{self.lc.take_timeout_s} s at version {self.trainer.version}; counters: "
                               f"{self.counters.snapshot()}")
        wait_s = time.monotonic() - t0
        colocated = self.rl.placement == "colocated"
        if colocated:  # the engines give the devices up (pools freed), the optimizer state comes back
            self.rollout.pause()
            self.trainer.reload_optimizer()
        try:
            metrics = self.trainer.train(groups)
            metrics.update(self.draft_metrics())  # before the publication: the window of the version it replaces
            self.publish()
            self.gate.notify()
            metrics.update(wait_s=wait_s, train_s=time.monotonic() - t0 - wait_s,
                           **{f"count/{k}": v for k, v in self.counters.snapshot().items()})
            if on_version is not None:
                on_version(metrics)
        finally:
            if colocated:  # episodes in flight continue with the new version at their next decode step
                self.trainer.offload_optimizer()
                self.rollout.resume()
        return metrics
