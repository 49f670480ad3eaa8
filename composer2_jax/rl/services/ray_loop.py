"""The RL loop over Ray actors: the embedded orchestrator's control logic (staleness gate, group buffer, trainer
loop) in the driver, with episodes on EnvActors and replies on RolloutActors (ray_actors.py).

Weight publication: after each version the driver puts the host weights in the WeightRegistry; rollout actors
pull a newer version between engine steps (an episode in flight picks it up at its next decode step) and reshard it
onto their own engines' meshes. Each RolloutActor is a process with its own JAX devices (`rl.ray.
rollout_host_devices` on CPU hosts, `rollout_resources.num_gpus` on GPU nodes): the transfer between the trainer's
process and an actor's goes through Ray's object store (host memory), then one device_put onto the engine's mesh;
with `rl.ray.weight_deltas` versions after the first travel as deltas (weight_delta.py). With
`rl.ray.weight_sync='device'` the driver and the actors are one jax.distributed job (driver process 0, actor i
process i + 1: `join_device_sync_job` starts the actors, then joins) and each version moves device to device by a
collective (device_sync.py); `publish` then blocks until every actor took part, between its engine steps.

Faults: an episode whose EnvActor or RolloutActor died raises in the driver (RayActorError or the actor's error) and
is retried on the next EnvActor, then dropped and counted, exactly as in the embedded loop; Ray restarts the dead
actor.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
from collections.abc import Sequence

import jax
import ray

from composer2_jax.env.harness import TurnCheckpoint
from composer2_jax.rl.curriculum import Curriculum
from composer2_jax.rl.records import Counters, EpisodeRecord
from composer2_jax.rl.run_config import RayConfig, RLExperimentConfig
from composer2_jax.rl.services.device_sync import DeviceWeightSender, check_one_job
from composer2_jax.rl.services.local import LocalOrchestrator
from composer2_jax.rl.services.ray_actors import EnvActor, RegistryPublisher, RolloutActor, WeightRegistry
from composer2_jax.rl.services.trainer import Trainer
from composer2_jax.rl.services.weights import WeightStore
from composer2_jax.train import distributed

log = logging.getLogger(__name__)


class RayOrchestrator(LocalOrchestrator):
    """The embedded orchestrator with episodes executed on Ray actors."""

    def __init__(self, run: RLExperimentConfig, trainer: Trainer, curriculum: Curriculum, counters: Counters,
                 stop_id: int, store: WeightStore | None = None, started: tuple | None = None):
        """`started`: (registry, rollout actors) from `join_device_sync_job` (weight_sync='device'); else both are
        created here."""
        r, limit = run.rl.ray, trainer.law.vocab_limit
        if started is None:
            started = start_rollout_actors(run, stop_id, limit)
        self.registry, self.rollouts = started
        self.publisher = RegistryPublisher(self.registry, r.weight_deltas, counters)
        # weight_sync='device': one sender per actor (actor i is process i + 1 of the driver's job)
        self.senders = [DeviceWeightSender(f"rollout{i + 1}", 0, i + 1)
                        for i in range(r.rollout_actors if r.weight_sync == "device" else 0)]
        tokens = run.tokenizer.build().vocab_size  # the EnvActor's policy cuts a reply at an id beyond them
        self.envs = [EnvActor.options(**_placement(r.env_resources)).remote(
            run, trainer.num_moe, trainer.model_cfg.num_experts_per_tok, tokens, run.rollout.prompt_len)
            for _ in range(r.env_actors)]
        super().__init__(trainer, None, None, curriculum, run.rl, store if store is not None else WeightStore(),
                         counters)
        self._next = itertools.count()
        self._owner: dict[str, int] = {}  # tree groups: checkpoint snapshot -> index of the EnvActor holding it
        self._lock = threading.Lock()

    def execute(self, task, version: int, checkpoint: TurnCheckpoint | None = None) -> EpisodeRecord:
        """One episode on the next EnvActor, its replies from the next RolloutActor (round robin).

        Tree groups: a branch resumes on the EnvActor that holds its checkpoint's snapshot (an actor's sandboxes
        and snapshots are its own); its boundaries are recorded as that actor's. If that actor died, the snapshot
        died with it and the branch fails (retried, then dropped with its group, as any failed episode)."""
        tree = self.rl.group_mode == "tree"
        with self._lock:
            i = next(self._next) if checkpoint is None else self._owner[checkpoint.snapshot]
        e = i % len(self.envs)
        rollout = self.rollouts[i % len(self.rollouts)]
        inherited = self.inherited_calls(checkpoint)
        record, calls = ray.get(self.envs[e].run.remote(task, version, rollout, checkpoint, tree, inherited))
        if tree:
            with self._lock:
                self._owner.update((c.snapshot, e) for c in record.harness.checkpoints)
            self.remember_calls(record, inherited + calls)
        return record

    def release_checkpoints(self, checkpoints: Sequence[TurnCheckpoint]) -> None:
        """Each checkpoint's snapshot deleted by the EnvActor that holds it; a dead actor's are already gone."""
        by_actor: dict[int, list[TurnCheckpoint]] = {}
        with self._lock:
            for c in checkpoints:
                by_actor.setdefault(self._owner.pop(c.snapshot), []).append(c)
        for i, ckpts in by_actor.items():
            try:
                self.counters.add("tree_snapshots_released", ray.get(self.envs[i].release.remote(ckpts), timeout=60))
            except Exception as e:  # noqa: BLE001 - a dead actor's snapshots died with it
                log.warning("EnvActor %d could not release %d checkpoints: %s: %s", i, len(ckpts), type(e).__name__, e)
        self.forget_calls(checkpoints)

    def publish(self) -> None:
        """The new version to the driver's store (admission) and to the registry (rollout actors): in full, or as a
        delta from the previous version with rl.ray.weight_deltas."""
        weights = self.trainer.weights()
        self.store.publish(weights)
        for sender in self.senders:  # each blocks until its actor took part (between the actor's engine steps)
            sender.publish(weights)
            self.counters.add("weight_syncs_device")
        if not self.senders:
            self.publisher.publish(weights)

    def start_services(self) -> list[threading.Thread]:
        """Actors run themselves; nothing to start in the driver."""
        return []

    def _rollout_dead(self) -> bool:
        """No rollout thread here: Ray restarts a dead RolloutActor, and a retry meanwhile fails and is counted."""
        return False

    def stop_services(self) -> None:
        """Close the environments' sandboxes and release the actors (with device sync: after every process left the
        jax.distributed job together)."""
        if self.senders:
            left = [a.leave_job.remote() for a in self.rollouts]
            jax.distributed.shutdown()
            with contextlib.suppress(Exception):
                ray.get(left, timeout=120)
        for env in self.envs:
            with contextlib.suppress(Exception):  # a dead actor has no sandboxes left to close
                ray.get(env.shutdown.remote(), timeout=30)
        for actor in self.envs + self.rollouts + [self.registry]:
            ray.kill(actor)

    def draft_counts(self) -> tuple[int, int]:
        """(drafted, accepted) MTP tokens summed over the rollout actors (their counters live in their processes)."""
        stats = self.actor_stats()
        return sum(s.get("rollout_drafted", 0) for s in stats), sum(s.get("rollout_accepted", 0) for s in stats)

    def actor_stats(self) -> list[dict]:
        """Counters of each rollout actor; {} (and `rollout_stats_unavailable` counted) for an actor that is dead or
        restarting: a restarted actor's counters start again from zero, so these are counts since its last start."""
        stats = []
        for ref in [a.stats.remote() for a in self.rollouts]:
            try:
                stats.append(ray.get(ref, timeout=60))
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError, ray.exceptions.GetTimeoutError):
                self.counters.add("rollout_stats_unavailable")
                stats.append({})
        return stats


def start_rollout_actors(run: RLExperimentConfig, stop_id: int, vocab_limit: int, device_sync: bool = False):
    """(the weight registry, the RolloutActors); with `device_sync` actor i joins the driver's job as process i + 1."""
    r = run.rl.ray
    registry = WeightRegistry.options(**_placement(r.registry_resources)).remote()
    rollouts = [RolloutActor.options(**rollout_actor_options(r, i + 1 if device_sync else 0)).remote(
        run.model, run.rollout, stop_id, registry, vocab_limit, r.weight_deltas, i + 1 if device_sync else 0)
        for i in range(r.rollout_actors)]
    return registry, rollouts


def join_device_sync_job(run: RLExperimentConfig, stop_id: int, vocab_limit: int):
    """weight_sync='device', before the driver uses JAX: start the rollout actors (each joins the job as it starts),
    then join the job as process 0 (returns once every process is in). (registry, actors) for RayOrchestrator."""
    r = run.rl.ray
    want = r.rollout_actors + 1
    job = {k: os.environ.get(k) for k in ("C2J_COORDINATOR", "C2J_NUM_PROCESSES", "C2J_PROCESS_ID")}
    if None in job.values() or job["C2J_NUM_PROCESSES"] != str(want) or job["C2J_PROCESS_ID"] != "0":
        raise ValueError(f"rl.ray.weight_sync='device' needs the driver started as process 0 of a jax.distributed job "
                         f"of rl.ray.rollout_actors + 1 = {want} processes (C2J_COORDINATOR=host:port, "
                         f"C2J_NUM_PROCESSES={want}, C2J_PROCESS_ID=0); this driver has {job}. Use "
                         f"weight_sync='object_store' otherwise")
    started = start_rollout_actors(run, stop_id, vocab_limit, device_sync=True)
    distributed.initialize()
    for i in range(r.rollout_actors):
        check_one_job(0, i + 1)
    return started


def rollout_actor_options(r: RayConfig, process_id: int = 0) -> dict:
    """A RolloutActor's Ray options: its resources and, with `rollout_host_devices`, a process of its own whose XLA
    host platform has that many devices (the actor's engines shard over them; the driver's devices are not its).
    `process_id` > 0: the actor joins the driver's jax.distributed job as that process (the C2J_* variables)."""
    options = _placement(r.rollout_resources)
    env = {}
    if r.rollout_host_devices:
        env.update(XLA_FLAGS=f"--xla_force_host_platform_device_count={r.rollout_host_devices}", JAX_PLATFORMS="cpu")
    if process_id:
        env.update(C2J_COORDINATOR=os.environ["C2J_COORDINATOR"], C2J_NUM_PROCESSES=os.environ["C2J_NUM_PROCESSES"],
                   C2J_PROCESS_ID=str(process_id))
    if env:
        options["runtime_env"] = {"env_vars": env}
    return options


def _placement(resources: dict) -> dict:
    """Actor options from a config dict ({num_cpus, num_gpus, resources: {...}}); zero custom resources dropped."""
    d = dict(resources or {})
    if "resources" in d:
        d["resources"] = {k: v for k, v in d["resources"].items() if v}
    return {k: v for k, v in d.items() if v is not None}

