"""RL episodes of image tasks (Dockerfile, docker_image, docker-compose and multi-step Harbor tasks) through the
sandboxes the evaluator uses (bench/runner.py), so a task trains exactly as it is graded.

    episodes = ImageEpisodes(env)
    opened = episodes.open(task)             # fork of the step's start: every service of a compose task, the task's
                                             # egress policy (allow_internet) and resources, /logs made, healthchecks
                                             # passed, the step's workdir/ and setup.sh applied, the agent's user set
    ... run_episode(view, opened.sid, ...); grade (rl/grading.py, a fork of opened.sid) ...
    episodes.close(opened)

The first episode of a task builds its image(s) (bench/runner.SnapshotCache: cached by content across runs) and every
later one forks the snapshot. Step k of a multi-step task starts from a snapshot of the machine after the reference
solutions of steps 1..k-1 ran (each step prepared as the runner prepares it), made once per step; snapshots are of
files, so processes those solutions left running are restarted only if the image's entrypoint starts them.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from composer2_jax.bench import compose
from composer2_jax.bench.runner import SnapshotCache, agent_phase_egress, prepare_step, resources_of
from composer2_jax.bench.task import Step, Task

LOGS_COMMAND = ("mkdir -p /logs/agent /logs/verifier /logs/artifacts && chmod 777 /logs/agent /logs/verifier "
                "/logs/artifacts")
SOLUTION_DIR = "/solution"


@dataclasses.dataclass
class Opened:
    """A started episode machine: the agent's sandbox, and the services' group of a compose task."""

    sid: str
    group: compose.ComposeGroup | None = None


class ImageEpisodes:
    """Opens and closes the sandboxes of image-task episodes on one Environment (thread-safe)."""

    def __init__(self, env: Any, snapshots: SnapshotCache | None = None):
        self.env = env
        self.snapshots = snapshots or SnapshotCache(env)
        self._starts: dict[tuple[str, int], Any] = {}  # (task name, step index) -> that step's start snapshot
        self._locks: dict[tuple[str, int], threading.Lock] = {}
        self._lock = threading.Lock()

    def start(self, task: Task, step: int) -> Any:
        """The snapshot a step starts from (a snapshot id, or a ComposeSnapshot); built on first use."""
        if step == 0:
            return self.snapshots.get(task)
        key = (task.name, step)
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._starts:
                self._starts[key] = self._solved_through(task, step)
            return self._starts[key]

    def _solved_through(self, task: Task, step: int) -> Any:
        """A snapshot of the machine after steps 0..step-1 were prepared and solved by their reference solutions."""
        opened = self._fork(task, self.start(task, step - 1))
        try:
            done = task.steps[step - 1]
            self._prepare(opened.sid, task, done)
            self._solve(opened.sid, task, done)
            return opened.group.snapshot() if opened.group is not None else self.env.snapshot(opened.sid)
        finally:
            self.close(opened)

    def _solve(self, sid: str, task: Task, step: Step) -> None:
        """Run a step's solution/solve.sh as Harbor's oracle does (at /solution, as root); RuntimeError if it fails."""
        self.env.exec(sid, f"rm -rf {SOLUTION_DIR}", timeout_s=60, user="")
        self.env.put_dir(sid, step.solution_dir, SOLUTION_DIR, user="")
        timeout = step.config.agent_timeout_s or task.config.agent_timeout_s or 600.0
        r = self.env.exec(sid, f"chmod +x {SOLUTION_DIR}/solve.sh && {SOLUTION_DIR}/solve.sh", timeout_s=timeout,
                          user="")
        if r["exit_code"] != 0:
            raise RuntimeError(f"{task.name}: step {step.config.name!r}'s solve.sh exited with {r['exit_code']} while "
                               f"preparing the next step's start: {(r['stdout'] + r['stderr'])[-500:]}")
        self.env.exec(sid, f"rm -rf {SOLUTION_DIR}", timeout_s=60, user="")

    def _fork(self, task: Task, snap: Any) -> Opened:
        """Fork a start snapshot with the task's agent policy and resources (every service of a compose task)."""
        policy, resources = agent_phase_egress(task), resources_of(task)
        if isinstance(snap, compose.ComposeSnapshot):
            group = compose.fork_compose(self.env, snap, policy, resources)
            opened = Opened(group.main, group)
        else:
            opened = Opened(self.env.fork(snap, policy=policy, resources=resources))
        try:
            if hasattr(self.env, "set_phase"):
                self.env.set_phase(opened.sid, "agent")
            self.env.exec(opened.sid, LOGS_COMMAND, timeout_s=60, user="")
            if task.config.healthcheck is not None:
                compose.wait_healthy(self.env, opened.sid, task.config.healthcheck)
        except BaseException:
            self.close(opened)
            raise
        return opened

    def _prepare(self, sid: str, task: Task, step: Step) -> None:
        """The runner's preparation of a step (its user, workdir/ files, setup.sh, healthcheck)."""
        prepare_step(self.env, sid, task, step)
        self.env.set_user(sid, None)

    def open(self, task: Task, step: int | None = None) -> Opened:
        """A fork of the step's start, prepared for the agent (the agent's user set, as in a trial)."""
        index = step or 0
        opened = self._fork(task, self.start(task, index))
        try:
            prepare_step(self.env, opened.sid, task, task.run_steps()[index])
        except BaseException:
            self.close(opened)
            raise
        return opened

    def close(self, opened: Opened) -> None:
        """Close the episode's sandboxes (every service's) and its network; idempotent."""
        try:
            self.env.close(opened.sid)
        except KeyError:
            pass
        if opened.group is not None:
            opened.group.close()
