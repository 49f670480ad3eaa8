"""Environment worker: a pool of sandboxes that turns (task, policy) into a graded, rewarded EpisodeRecord.

    task → snapshot (imported once per task) → fork → episode through the harness → grade in a fresh fork with the
    hidden check copied in only then → the episode's outcome (verdict, effort, the workspace changes read from the
    sandbox's own layers, the todo_write history, thinking and final message, malformed calls, the egress log) →
    reward (every term of rl/rewards.py) → close the sandbox.

A failure of the sandbox or of the policy raises out of `run`; the caller (the orchestrator) retries or drops the
episode and counts it. The sandbox is closed whatever happens.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from composer2_jax.data import tokenizer as tk
from composer2_jax.env import SandboxLimits
from composer2_jax.env.harness import (
    EpisodeResult,
    HarnessConfig,
    TurnCheckpoint,
    fork_checkpoint,
    resume_episode,
    run_episode,
)
from composer2_jax.env.tool_schemas import TOOL_NAMES
from composer2_jax.env.workspace import make_repo
from composer2_jax.rl.grading import grade_episode
from composer2_jax.rl.records import EpisodeRecord
from composer2_jax.rl.rewards import (
    EpisodeOutcome,
    RewardConfig,
    TestResult,
    compute_reward,
    effort_counts_from_episode,
)
from composer2_jax.rl.run_config import EnvConfig, RLExperimentConfig
from composer2_jax.rl.services.tool_view import ToolView
from composer2_jax.rl.sources import HarborTask, RLTask, required_tools


class LayerSafeEnv:
    """An Environment whose layer-changing operations (fork, snapshot, import, close, …) run one at a time.

    Works around a race in `env.layers.LayerStore.gc`: it takes the set of pinned layers before listing the layer
    directory, so a layer created in between by another thread's fork or snapshot is deleted under it (the mount
    then fails with ENOENT). Tool calls are not serialised.
    """

    _SERIAL = ("fork", "snapshot", "import_repo", "close", "restore", "delete_snapshot", "create")

    def __init__(self, env: Any):
        self.env = env
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.env, name)
        if name not in self._SERIAL:
            return attr

        def serial(*args, **kwargs):
            with self._lock:
                return attr(*args, **kwargs)

        return serial


class EnvWorker:
    """Runs episodes of RL tasks of any source (rl/sources.py) on one Environment (thread-safe: one sandbox per
    episode)."""

    def __init__(self, env: Any, tokenizer: tk.Tokenizer, harness: HarnessConfig, reward: RewardConfig,
                 tools: Sequence[str] = TOOL_NAMES, schemas_in_prompt: bool = True,
                 repo_root: str | Path | None = None, grade_timeout_s: float = 30.0):
        env = env if isinstance(env, LayerSafeEnv) else LayerSafeEnv(env)
        self.env, self.tok, self.harness, self.reward_cfg = env, tokenizer, harness, reward
        self.view = ToolView(env, tools, schemas_in_prompt)  # what the agent sees; grading uses the env itself
        self.grade_timeout_s = grade_timeout_s
        self._root = Path(repo_root or tempfile.mkdtemp(prefix="rl-repos-"))
        self._snaps: dict[str, str] = {}
        self._task_locks: dict[str, threading.Lock] = {}  # a task's first import, while it runs
        self._lock = threading.Lock()

    def snapshot(self, task: RLTask) -> str:
        """The task's starting repository as a snapshot id (written or materialised, and imported, on first use).

        One thread per task writes and imports (the others wait on the task's lock): two episodes of a new task
        starting together would otherwise write the same folder at once, and one could import the other's
        half-written (truncated) files."""
        with self._lock:
            snap = self._snaps.get(task.task_id)
            if snap is not None:
                return snap
            task_lock = self._task_locks.setdefault(task.task_id, threading.Lock())
        with task_lock:
            with self._lock:
                snap = self._snaps.get(task.task_id)
            if snap is not None:  # imported by the thread that held the task's lock
                return snap
            if isinstance(task, HarborTask):
                repo = str(task.repo_dir(self._root / "harbor-cache"))
            else:
                repo = make_repo(str(self._root / task.task_id), task.files())
            snap = self.env.import_repo(repo)
            with self._lock:
                self._snaps[task.task_id] = snap
                self._task_locks.pop(task.task_id, None)
            return snap

    def run(self, task: RLTask, policy: Any, admitted_version: int, routing_fn=None,
            transcript: list | None = None, checkpoint: TurnCheckpoint | None = None,
            checkpoints: bool = False) -> EpisodeRecord:
        """One episode of `task` with `policy`, graded and rewarded.

        `routing_fn(episode)` gives the per-segment routing records; `transcript`, if given, receives the chat
        messages of the episode. Branching rollouts: `checkpoint` resumes the episode from a turn boundary of an
        earlier one (the record is the whole episode, its inherited prefix included; its workspace changes count
        from the task's start); `checkpoints` keeps one per turn boundary in `record.harness.checkpoints` (their
        snapshots are the caller's: `release`).
        """
        if checkpoint is None:
            sid = self.env.fork(self.snapshot(task))
        else:
            sid = fork_checkpoint(self.env, checkpoint)
        try:
            if checkpoint is None:
                result = run_episode(self.view, sid, task.instruction, policy, self.tok, self.harness,
                                     task_id=task.task_id, group_id=task.task_id, checkpoints=checkpoints)
            else:
                result = resume_episode(self.view, sid, checkpoint, policy, self.tok, self.harness,
                                        task_id=task.task_id, group_id=task.task_id, checkpoints=checkpoints)
            try:
                grade = grade_episode(self.env, sid, task, self.grade_timeout_s)
                outcome = self.outcome(sid, result, grade.tests)
            except BaseException:
                self.release(result.checkpoints)  # the record is lost: nobody else will delete them
                raise
            if transcript is not None:
                transcript.extend(result.messages)
        finally:
            _close_quietly(self.env, sid)
        breakdown = compute_reward(outcome, self.reward_cfg)
        routing = routing_fn(result.episode) if routing_fn is not None else [None] * len(result.episode.segments)
        return EpisodeRecord(
            episode=result.episode.with_reward(breakdown.total), routing=routing, task_id=task.task_id,
            difficulty=task.difficulty, reward=breakdown.total, success=breakdown.success, effort=breakdown.effort,
            breakdown=breakdown.as_dict(), stop_reason=result.stop_reason, turns=result.turns,
            tool_calls=len(result.tool_calls), malformed=result.malformed,
            generated_tokens=result.generated_tokens - (0 if checkpoint is None else checkpoint.generated_tokens),
            wall_s=result.wall_s, grade_s=grade.wall_s, admitted_version=admitted_version,
            source=task.source, harness=result if checkpoints or checkpoint is not None else None)

    def release(self, checkpoints: Sequence[TurnCheckpoint]) -> int:
        """Delete the snapshots of checkpoints (a tree group is done with them); how many were still held."""
        deleted = 0
        for ckpt in checkpoints:
            with contextlib.suppress(KeyError):  # already deleted
                self.env.delete_snapshot(ckpt.snapshot)
                deleted += 1
        return deleted

    def outcome(self, sid: str, result: EpisodeResult, tests: TestResult) -> EpisodeOutcome:
        """Everything the reward reads about a finished episode on sandbox `sid` (after grading: its processes are
        gone and its writes frozen into its chain). Lint (one ruff process; its measured cost: docs/rl.md, "Reward
        terms") runs only when its term has weight or `reward.measure_all` asks for every measurement."""
        changes = self.env.changes(sid)
        state = self.env.episode(sid)
        lint = self.reward_cfg.lint_coef > 0 or self.reward_cfg.measure_all
        return EpisodeOutcome(
            tests=tests, effort=effort_counts_from_episode(result.episode), todos=state["todos"],
            todo_history=state["todo_history"], diff=changes.unified_diff(),
            files_before=changes.before if lint else None, files_after=changes.after if lint else None,
            tool_call_errors=result.tool_call_errors, thinking=result.thinking, final_message=result.final_message,
            egress=self.env.egress_log(sid))

    def close(self) -> None:
        """Forget the snapshots (the environment itself belongs to the caller)."""
        with self._lock:
            snaps, self._snaps = list(self._snaps.values()), {}
        for snap in snaps:
            with contextlib.suppress(KeyError):  # already deleted
                self.env.delete_snapshot(snap)


def _close_quietly(env: Any, sid: str) -> None:
    """Close a sandbox that may already be gone."""
    with contextlib.suppress(KeyError):
        env.close(sid)


def sandbox_limits(env: EnvConfig) -> SandboxLimits:
    """The sandbox limits of a run's environment section."""
    return SandboxLimits(timeout_s=env.command_timeout_s)


def env_worker_for(run: RLExperimentConfig, env: Any, tokenizer: tk.Tokenizer) -> EnvWorker:
    """The environment worker of a run over `env`: its tool view (env.tools, plus what the curriculum's families
    need: rl/sources.py `required_tools`), harness, reward and grading limit."""
    tools = run.env.tools + tuple(t for t in required_tools(run.tasks) if t not in run.env.tools)
    return EnvWorker(env, tokenizer, run.harness, run.reward, tools, run.env.schemas_in_prompt,
                     grade_timeout_s=run.env.grade_timeout_s)
