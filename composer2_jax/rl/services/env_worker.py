"""Environment worker: a pool of sandboxes that turns (task, policy) into a graded, rewarded EpisodeRecord.

    task → snapshot (imported once per task) → fork → episode through the harness → grade in a fresh fork with the
    hidden check copied in only then → the episode's outcome (verdict, effort, the workspace changes read from the
    sandbox's own layers, the todo_write history, thinking and final message, malformed calls, the egress log) →
    reward (every term of rl/rewards.py) → close the sandbox.

Image tasks of Harbor folders (a Dockerfile, docker_image, docker-compose or several steps) run in the sandboxes the
evaluator uses (rl/image_tasks.py): a fork of the task's (or step's) start with the task's egress policy and resources,
every service of a compose task beside it; their outcome has no workspace diff (the changes are read from workspace
layers only). Each task family can have its own tools and harness (`set_family`: the Harbor folders get the deploy
harness's full tool set and budgets scaled to the model's context, `harbor_harness`).

A failure of the sandbox or of the policy raises out of `run`; the caller (the orchestrator) retries or drops the
episode and counts it. The sandbox is closed whatever happens.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from composer2_jax.data import tokenizer as tk
from composer2_jax.env import SandboxLimits
from composer2_jax.env.harness import (
    EpisodeOptions,
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
from composer2_jax.rl.sources import HARBOR_KINDS, HarborTask, RLTask, parse_mix, required_tools


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
        self._families: dict[str, tuple[ToolView, HarnessConfig]] = {}  # source kind -> its tools and harness
        self._images = None  # rl/image_tasks.ImageEpisodes, made on the first image task

    def set_family(self, kind: str, tools: Sequence[str], harness: HarnessConfig) -> None:
        """The tools and harness of one source kind (rl/sources.py KINDS: "suite", "generated", ...)."""
        self._families[kind] = (ToolView(self.env, tools, self.view.schemas_in_prompt), harness)

    def family(self, task: RLTask) -> tuple[ToolView, HarnessConfig]:
        """The tool view and harness a task's episodes use: its source kind's, else the worker's own."""
        view, harness = self._families.get(task.source.partition(":")[0], (self.view, self.harness))
        return view, harness

    def images(self):
        """The image-task episode opener (made on first use)."""
        with self._lock:
            if self._images is None:
                from composer2_jax.rl.image_tasks import ImageEpisodes

                self._images = ImageEpisodes(self.env)
            return self._images

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
        image = isinstance(task, HarborTask) and task.task.is_image
        view, harness = self.family(task)
        options = EpisodeOptions(task_id=task.task_id, group_id=task.task_id, checkpoints=checkpoints)
        opened = None
        if image:
            if checkpoint is not None:
                raise ValueError(f"{task.task_id}: branching rollouts (checkpoints) resume workspace tasks only; "
                                 "expected rl.group_mode='plain' for image tasks")
            opened = self.images().open(task.task, task.step)
            sid = opened.sid
            harness = _image_harness(self.env, sid, task, harness)
        elif checkpoint is None:
            sid = self.env.fork(self.snapshot(task))
        else:
            sid = fork_checkpoint(self.env, checkpoint)
        try:
            if checkpoint is None:
                result = run_episode(view, sid, task.instruction, policy, self.tok, harness, options)
            else:
                result = resume_episode(view, sid, checkpoint, policy, self.tok, harness, options)
            try:
                if image:
                    self.env.set_user(sid, None)  # the verifier runs as the image's user, as in a trial
                grade = grade_episode(self.env, sid, task, self.grade_timeout_s)
                outcome = self.outcome(sid, result, grade.tests)
            except BaseException:
                self.release(result.checkpoints)  # the record is lost: nobody else will delete them
                raise
            if transcript is not None:
                transcript.extend(result.messages)
        finally:
            if opened is not None:
                self.images().close(opened)
            else:
                _close_quietly(self.env, sid)
        disk = None
        if hasattr(self.env, "disk"):  # what the episode's checkpoints and grading fork added to the layer store
            with contextlib.suppress(KeyError):
                disk = self.env.disk(sid)
        breakdown = compute_reward(outcome, self.reward_cfg)
        routing = routing_fn(result.episode) if routing_fn is not None else [None] * len(result.episode.segments)
        return EpisodeRecord(
            episode=result.episode.with_reward(breakdown.total), routing=routing, task_id=task.task_id,
            difficulty=task.difficulty, reward=breakdown.total, success=breakdown.success, effort=breakdown.effort,
            breakdown=breakdown.as_dict(), stop_reason=result.stop_reason, turns=result.turns,
            tool_calls=len(result.tool_calls), malformed=result.malformed,
            generated_tokens=result.generated_tokens - (0 if checkpoint is None else checkpoint.generated_tokens),
            wall_s=result.wall_s, grade_s=grade.wall_s, admitted_version=admitted_version,
            source=task.source, harness=result if checkpoints or checkpoint is not None else None, disk=disk)

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
        changes = self.env.changes(sid) if self.env.profile(sid) is None else None  # image sandboxes: no diff
        state = self.env.episode(sid)
        lint = (self.reward_cfg.lint_coef > 0 or self.reward_cfg.measure_all) and changes is not None
        return EpisodeOutcome(
            tests=tests, effort=effort_counts_from_episode(result.episode), todos=state["todos"],
            todo_history=state["todo_history"], diff=changes.unified_diff() if changes is not None else "",
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


def _image_harness(env: Any, sid: str, task: HarborTask, harness: HarnessConfig) -> HarnessConfig:
    """An image task's episode limits: the runner's image prompt (working directory, user, network) and the step's
    or task's [agent] timeout, on the family's budgets."""
    from composer2_jax.bench.runner import harness_config

    profile = env.profile(sid)
    return harness_config(task.task, task.run_step(), harness, profile.workdir, profile.user or "root")


def harbor_harness(run: RLExperimentConfig, tokenizer: tk.Tokenizer) -> HarnessConfig:
    """The Harbor families' harness: prompt, reply and summary budgets scaled to the context the run's model and
    engine hold (the model's max_position_embeddings, within rollout.prompt_len + max_new_tokens and the trainer's
    seq_len), never the toy family's constants. Reply = min(rollout.max_new_tokens, context / 8); summary =
    min(reply, context / 16); context budget = what is left of the prompt window after a summary request."""
    window = min(run.model.max_position_embeddings, run.rollout.prompt_len + run.rollout.max_new_tokens,
                 run.trainer.seq_len)
    reply = max(1, min(run.rollout.max_new_tokens, window // 8))
    summary = max(1, min(reply, window // 16))
    summary_prompt = len(tokenizer.encode(run.harness.summary_prompt)) + 16  # + headers (orchestrator.check_shapes)
    budget = min(run.rollout.prompt_len, window - reply) - summary_prompt
    if budget <= 0:
        raise ValueError(f"the Harbor families' context budget would be {budget} tokens (context {window}, reply "
                         f"{reply}, summary request {summary_prompt}); expected a longer rollout.prompt_len")
    return dataclasses.replace(run.harness, context_budget=budget, max_new_tokens=reply, summary_tokens=summary,
                               max_total_tokens=max(run.harness.max_total_tokens, reply * run.harness.max_turns))


def env_worker_for(run: RLExperimentConfig, env: Any, tokenizer: tk.Tokenizer) -> EnvWorker:
    """The environment worker of a run over `env`: its tool view (env.tools, plus what the curriculum's families
    need: rl/sources.py `required_tools`), harness, reward and grading limit; the Harbor kinds of the curriculum
    (suite:, generated:) get env.harbor_tools and `harbor_harness`."""
    tools = run.env.tools + tuple(t for t in required_tools(run.tasks) if t not in run.env.tools)
    worker = EnvWorker(env, tokenizer, run.harness, run.reward, tools, run.env.schemas_in_prompt,
                       grade_timeout_s=run.env.grade_timeout_s)
    kinds = {s.kind for s in parse_mix(run.tasks)} & set(HARBOR_KINDS)
    if kinds:
        harness = harbor_harness(run, tokenizer)
        for kind in kinds:
            worker.set_family(kind, run.env.harbor_tools, harness)
    return worker
