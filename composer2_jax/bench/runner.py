"""Run an agent on a suite: one sandbox per (task, sample), the harness drives the agent, the hidden tests grade the
sandbox as the agent left it; trials run in parallel threads.

A trial, as Harbor runs one (harbor.trial.trial / harbor.trial.multi_step):
1. fork the task's snapshot (imported once per task: a repository, or an image built from environment/Dockerfile,
   cached by content) with the task's egress policy and, for image tasks, its cpus / memory_mb / storage_mb; a
   multi-container task (environment/docker-compose.yaml, bench/compose.py) starts every service, in depends_on
   order, on the trial's private network, and the agent works in the main one;
2. image tasks: /logs/{agent,verifier,artifacts} are made; the [environment] healthcheck must pass;
3. per step (a single-step task is one step): copy steps/<name>/workdir/ into the working directory and run its
   setup.sh; run the agent (the step's instruction, the step's or task's agent timeout, not capped; as the
   [agent] user); grade a fresh fork of it, its processes killed (bench/grade.py); stop when the step errs or
   misses its min_reward;
4. the trial's rewards: the one step's, or the steps' per-key mean ("mean", missing keys 0) or the last step's
   ("final"); passed = scalar ≥ 1.
Anything that fails (a build, a missing solve.sh for the oracle, a crashed harness) is the trial's `error` and
never stops the run; a verifier that could not run is its `grade_error` (reward None), never a 0 reward.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from composer2_jax.bench import compose
from composer2_jax.bench.grade import Grade, grade, scalar_reward
from composer2_jax.bench.policies import Agent
from composer2_jax.bench.task import Step, Suite, Task, TaskError, resolve_env
from composer2_jax.env.egress_policy import EgressPolicy
from composer2_jax.env.harness import (
    EpisodeOptions,
    EpisodeResult,
    HarnessConfig,
    run_episode,
    transcript_jsonl,
)
from composer2_jax.env.sandbox_config import Resources

log = logging.getLogger(__name__)
MiB = 1 << 20
DEFAULT_WORKDIR = "/app"  # Harbor tasks' convention when the image sets no WORKDIR
IMAGE_PROMPT = (
    "You are an expert software engineer working in a Linux container as {user}. Your working directory is {workdir}. "
    "Tool paths are relative to it and may be absolute anywhere on the machine. Use the tools to read files, run "
    "commands (bash) and edit files; nothing else changes the machine. Processes "
    "you start in the background keep running after the command returns. {network} Investigate before you change "
    "things and check your work. When the task is done, call submit with a short summary: the machine as you leave "
    "it is your answer.")


@dataclasses.dataclass
class Trial:
    """One episode (or one run of all steps) of one task and its grade."""

    task: str
    category: str
    difficulty: str
    sample: int
    reward: float | None = 0.0  # the pass/fail scalar; None when the verifier could not produce one
    passed: bool = False
    rewards: dict[str, float] = dataclasses.field(default_factory=dict)  # every key the verifier(s) wrote
    stop_reason: str = ""
    turns: int = 0
    tool_calls: int = 0
    malformed: int = 0
    generated_tokens: int = 0
    observation_tokens: int = 0
    summaries: int = 0
    agent_wall_s: float = 0.0
    grade_wall_s: float = 0.0
    wall_s: float = 0.0
    grade_error: str | None = None  # why the verifier produced no trustworthy reward (not a model failure)
    # image tasks: the verifier ran tools or an ENTRYPOINT the agent changed (steps' agent_files list them), or it is
    # unknown whether it did; such a verdict depends on agent-writable files (docs/benchmark.md)
    verdict_trusts_agent_files: bool = False
    error: str | None = None  # why the trial itself failed (build, harness or sandbox crash, no solve.sh, ...)
    notes: str = ""  # e.g. the malformed-call report
    log: str | None = None  # transcript file
    steps: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # per-step results of a multi-step task
    limits: dict[str, str] = dataclasses.field(default_factory=dict)  # how cpus/memory/storage were enforced
    image: dict[str, Any] = dataclasses.field(default_factory=dict)  # image key, base mappings, whether cached
    disk: dict[str, Any] = dataclasses.field(default_factory=dict)  # its sandbox lineage's layer-store growth
    # phase -> its egress events: "agent", "verifier" (multi-step tasks: "agent:<step>", "verifier:<step>")
    egress: dict[str, list[dict]] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return dataclasses.asdict(self)


class SnapshotCache:
    """One imported snapshot per task, shared by every trial (and by several runs on the same environment).

    Image tasks are built with `builder` (an `images.ImageBuilder`, made on first use) and imported with the
    task's working directory and [environment] env.
    """

    def __init__(self, env, cache_dir: str | Path | None = None, builder=None):
        self.env, self.cache_dir, self._builder = env, cache_dir, builder
        self._snaps: dict[str, str] = {}
        self._failed: dict[str, Exception] = {}  # task name -> why its import or build failed (not retried)
        self.images: dict[str, Any] = {}  # task name -> its Image
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def builder(self):
        """The image builder (created on first use)."""
        with self._lock:
            if self._builder is None:
                from composer2_jax.env.images import ImageBuilder

                self._builder = ImageBuilder()
            return self._builder

    def get(self, task: Task) -> str | compose.ComposeSnapshot:
        """The snapshot id of the task's starting state (imported or built on first use; a failure is remembered);
        a multi-container task's is a ComposeSnapshot (one snapshot per service)."""
        with self._lock:
            lock = self._locks.setdefault(task.name, threading.Lock())
        with lock:
            if task.name in self._failed:
                raise self._failed[task.name]
            if task.name not in self._snaps:
                try:
                    self._snaps[task.name] = self._import(task)
                except Exception as e:
                    self._failed[task.name] = e
                    raise
            return self._snaps[task.name]

    def _import(self, task: Task) -> str | compose.ComposeSnapshot:
        """Import a workspace task's repository, or build and import an image task's image (every service's, for a
        multi-container task)."""
        if not task.is_image:
            return self.env.import_repo(task.repo_dir(self.cache_dir))
        env = resolve_env(task.config.env, f"{task.path}: [environment] env")
        if task.compose is not None:
            return self._import_compose(task, env)
        image = self._build(task)
        self.images[task.name] = image
        workdir = task.config.workdir or image.config.workdir or DEFAULT_WORKDIR
        return self.env.import_image(image, workdir=workdir, env=env)

    def _import_compose(self, task: Task, env: dict[str, str]) -> compose.ComposeSnapshot:
        """Every service of a compose task built and imported; the main one's image is the task's `images` entry."""
        spec, built = task.compose, {}

        def build(svc: compose.Service):
            context, name = svc.context, svc.dockerfile
            if svc.image is not None:
                context = Path(self.builder().cache) / "work" / f"compose-image-{task.name}-{svc.name}"
                context.mkdir(parents=True, exist_ok=True)
                (context / "Dockerfile").write_text(f"FROM {svc.image}\n")
            built[svc.name] = self.builder().build(context, name, dict(svc.build_args) or None,
                                                   timeout_s=task.config.build_timeout_s)
            return built[svc.name]

        main_image = build(spec.service(spec.main))
        workdir = task.config.workdir or main_image.config.workdir or DEFAULT_WORKDIR
        snap = compose.import_compose(self.env, spec, lambda s: built.get(s.name) or build(s), workdir, env)
        self.images[task.name] = main_image
        return snap

    def _build(self, task: Task):
        """The task's image: environment/ built, or a docker_image used as a one-line Dockerfile."""
        builder = self.builder()
        if task.image_context is not None:
            return builder.build(task.image_context, timeout_s=task.config.build_timeout_s)
        context = Path(builder.cache) / "work" / f"docker-image-{task.name}"
        context.mkdir(parents=True, exist_ok=True)
        (context / "Dockerfile").write_text(f"FROM {task.config.docker_image}\n")
        return builder.build(context, timeout_s=task.config.build_timeout_s)


def _fill_from_episode(trial: Trial, result: EpisodeResult) -> None:
    """Add an episode's counts to the trial."""
    trial.stop_reason = result.stop_reason
    trial.turns += result.turns
    trial.tool_calls += len(result.tool_calls)
    trial.malformed += result.malformed
    trial.generated_tokens += result.generated_tokens
    trial.observation_tokens += result.observation_tokens
    trial.summaries += result.summaries
    trial.agent_wall_s += result.wall_s
    trial.notes = "; ".join(x for x in (trial.notes, result.malformed_report()) if x)


def agent_phase_egress(task: Task, run_policy: EgressPolicy | None = None) -> EgressPolicy:
    """What the agent's phase may reach: allow_internet = false / no-network: nothing; allowlist: allowed_hosts;
    public: [environment.egress] if the task gives one, else the run's allow list (`run_policy`; None: any host)."""
    cfg = task.config
    mode = cfg.network_mode or ("public" if cfg.allow_internet else "no-network")
    if run_policy is not None and mode == "public" and not cfg.egress.allow_hosts:
        return run_policy
    return cfg.network_policy


def resources_of(task: Task) -> Resources:
    """The sandbox resources of an image task's [environment]."""
    c = task.config
    return Resources(cpus=c.cpus, memory_bytes=c.memory_mb * MiB, storage_bytes=c.storage_mb * MiB)


def step_view(task: Task, step: Step) -> Task:
    """The task as an agent sees one step of it: the step's instruction and solution."""
    return dataclasses.replace(task, instruction=step.instruction, solution_dir=step.solution_dir)


def harness_config(task: Task, step: Step, config: HarnessConfig, workdir: str | None = None,
                   user: str = "root") -> HarnessConfig:
    """The episode's limits: the step's (or task's) agent timeout, the image prompt for image tasks."""
    timeout = step.config.agent_timeout_s or task.config.agent_timeout_s or config.timeout_s
    cfg = dataclasses.replace(config, timeout_s=timeout)
    if not task.is_image:
        return cfg
    policy = task.config.network_policy
    network = ("There is no network access." if not policy.allow_hosts else
               "Network access goes through an HTTP(S) proxy (already configured in the environment).")
    return dataclasses.replace(cfg, system_prompt=IMAGE_PROMPT.format(workdir=workdir, user=user, network=network))


def healthcheck(env, sid: str, task: Task, hc) -> None:
    """Run a healthcheck until it passes (Docker HEALTHCHECK rules); RuntimeError when it fails for good."""
    compose.wait_healthy(env, sid, hc)


def prepare_step(env, sid: str, task: Task, step: Step) -> None:
    """Before a step's agent: its workdir/ files into the working directory, workdir/setup.sh run, healthcheck."""
    if not task.is_image:
        return
    user = step.config.agent_user if step.config.agent_user is not None else task.config.agent_user
    env.set_user(sid, user)
    workdir = env.profile(sid).workdir
    if step.workdir_dir is not None:
        env.put_dir(sid, step.workdir_dir, workdir, user="")
        if (step.workdir_dir / "setup.sh").is_file():
            r = env.exec(sid, f"bash {workdir.rstrip('/')}/setup.sh", timeout_s=task.config.build_timeout_s)
            if r["exit_code"] != 0:
                raise RuntimeError(f"step {step.config.name!r}: setup.sh exited with {r['exit_code']}: "
                                   f"{(r['stdout'] + r['stderr'])[-500:]}")
    if step.config.healthcheck is not None:
        healthcheck(env, sid, task, step.config.healthcheck)


@dataclasses.dataclass(frozen=True)
class TrialOptions:
    """What every trial of a run shares besides the agent (`policies.Agent`: its policy factory, tokenizer and
    harness limits)."""

    log_dir: Path | None = None  # transcripts and verifier output, one file per trial (and step); None: none kept
    on_episode: Callable[[Task, EpisodeResult], None] | None = None  # called with each finished episode
    # the run's allow list for agents of tasks with public internet and no [environment.egress] (None: any host)
    agent_egress: EgressPolicy | None = None


def min_reward_miss(rewards: dict[str, float], min_reward) -> str | None:
    """Why a step's rewards miss its min_reward (a number applies to "reward"), or None."""
    if min_reward is None:
        return None
    thresholds = {"reward": min_reward} if isinstance(min_reward, float) else min_reward
    for key, threshold in thresholds.items():
        actual = rewards.get(key, float("-inf"))
        if actual < threshold:
            return f"{key}={actual} is below min_reward {threshold}"
    return None


def roll_up(task: Task, steps: list[dict[str, Any]]) -> dict[str, float] | None:
    """The trial's rewards from its graded steps: per-key mean (missing keys 0) or the last step's (Harbor)."""
    graded = [s for s in steps if s["grade_error"] is None and s["error"] is None and s["contributes"]]
    if not graded:
        return None
    if task.config.multi_step_reward_strategy == "final":
        return dict(graded[-1]["rewards"])
    keys = sorted({k for s in graded for k in s["rewards"]})
    return {k: sum(s["rewards"].get(k, 0.0) for s in graded) / len(graded) for k in keys}


def _run_step(env, sid: str, task: Task, step: Step, agent: Agent, trial: Trial,
              options: TrialOptions) -> dict[str, Any]:
    """One step: prepare, agent, grade; its result row (errors inside it are recorded, not raised)."""
    row = {"name": step.config.name, "reward": None, "rewards": {}, "passed": False, "grade_error": None,
           "error": None, "stop_reason": "", "contributes": step.config.contributes_to_reward}
    try:
        if task.steps and hasattr(env, "set_phase"):
            env.set_phase(sid, f"agent:{step.config.name}")  # the step's setup and agent
        prepare_step(env, sid, task, step)
        view = step_view(task, step)
        policy = agent.factory(view)
        profile = env.profile(sid) if task.is_image else None
        cfg = harness_config(task, step, agent.config, profile and profile.workdir,
                             (profile and profile.user) or "root")
        result = run_episode(env, sid, step.instruction, policy, agent.tokenizer, cfg,
                             EpisodeOptions(task_id=task.name, group_id=task.name))
        _fill_from_episode(trial, result)
        row["stop_reason"] = result.stop_reason
        log_dir = options.log_dir
        if log_dir is not None:
            suffix = f".{step.config.name}" if task.steps else ""
            path = log_dir / f"{task.name}.{trial.sample}{suffix}.jsonl"
            path.write_text(transcript_jsonl(result))
            trial.log = str(path)
        if options.on_episode is not None:
            options.on_episode(task, result)
        if task.is_image:
            env.set_user(sid, None)
        g: Grade = grade(env, sid, task, step if task.steps else None)
        for event in g.egress:  # the verifier ran in a fork of this sandbox: its phase's events come with the grade
            trial.egress.setdefault(event.get("phase") or "verifier", []).append(event)
        trial.grade_wall_s += g.wall_s
        row.update(reward=None if g.error else g.reward, rewards=g.rewards, passed=g.passed, grade_error=g.error,
                   agent_files=g.agent_files, agent_files_total=g.agent_files_total)
        if g.agent_files_total != 0:  # the verdict depends on files the agent could have replaced (or unknown)
            trial.verdict_trusts_agent_files = True
        if log_dir is not None:
            (log_dir / f"{task.name}.{trial.sample}{suffix}.verifier.txt").write_text(g.output)
    except Exception as e:  # noqa: BLE001 - a broken step ends the trial, never the run
        row["error"] = f"{type(e).__name__}: {e}"
        log.error("trial %s#%d step %s failed: %s\n%s", task.name, trial.sample, step.config.name, row["error"],
                  traceback.format_exc())
    return row


def run_trial(env, snapshots: SnapshotCache, task: Task, sample: int, agent: Agent,
              options: TrialOptions = TrialOptions()) -> Trial:
    """Fork the task's snapshot, run its steps (agent, then grading in a fork of its sandbox); never raises."""
    trial = Trial(task.name, task.category, task.difficulty, sample)
    start, sid, group = time.monotonic(), None, None
    try:
        snap = snapshots.get(task)
        image = snapshots.images.get(task.name)
        if image is not None:
            trial.image = {"key": image.key, "mappings": list(image.mappings), "cached": image.cached}
        if isinstance(snap, compose.ComposeSnapshot):  # every service started; the agent works in the main one
            group = compose.fork_compose(env, snap, agent_phase_egress(task, options.agent_egress), resources_of(task))
            sid = group.main
        else:
            sid = env.fork(snap, policy=agent_phase_egress(task, options.agent_egress),
                           resources=resources_of(task) if task.is_image else None)
        if hasattr(env, "set_phase"):
            env.set_phase(sid, "agent")  # allow_internet's policy; the verifier's phase is verify/network.py's
        if task.is_image:
            trial.limits = env.enforcement(sid)
            env.exec(sid, "mkdir -p /logs/agent /logs/verifier /logs/artifacts && chmod 777 /logs/agent "
                          "/logs/verifier /logs/artifacts", timeout_s=60, user="")
            if task.config.healthcheck is not None:
                healthcheck(env, sid, task, task.config.healthcheck)
        for i, step in enumerate(task.run_steps()):
            if i:
                env.new_episode(sid)
            row = _run_step(env, sid, task, step, agent, trial, options)
            trial.steps.append(row)
            if row["error"] or row["grade_error"]:
                break
            if min_reward_miss(row["rewards"], step.config.min_reward):
                row["stopped"] = min_reward_miss(row["rewards"], step.config.min_reward)
                break
        _finish(trial, task)
    except Exception as e:  # noqa: BLE001 - one broken trial must not stop a suite run
        trial.error = f"{type(e).__name__}: {e}"
        trial.reward = None
        log.error("trial %s#%d failed: %s\n%s", task.name, sample, trial.error, traceback.format_exc())
    finally:
        if sid is not None:
            try:
                env.close(sid)
            except KeyError:
                pass
            if hasattr(env, "disk"):  # what the trial's snapshots and forks added to the layer store (env/budget.py)
                trial.disk = env.disk(sid)
            try:
                for event in env.egress_log(sid):
                    trial.egress.setdefault(event.get("phase") or "agent", []).append(event)
            except (KeyError, AttributeError):
                pass
        if group is not None:
            group.close(keep_main=True)
    trial.wall_s = time.monotonic() - start
    if trial.notes:
        log.warning("%s#%d: %s", task.name, sample, trial.notes)
    return trial


def _finish(trial: Trial, task: Task) -> None:
    """Set the trial's reward, rewards, errors and pass from its step rows (a step's error is the trial's)."""
    label = (lambda s, text: f"{s['name']}: {text}") if task.steps else (lambda s, text: text)
    trial.error = "; ".join(label(s, s["error"]) for s in trial.steps if s["error"]) or None
    trial.grade_error = "; ".join(label(s, s["grade_error"]) for s in trial.steps if s["grade_error"]) or None
    rewards = roll_up(task, trial.steps)
    trial.rewards = rewards or {}
    if trial.error or trial.grade_error:
        trial.reward, trial.passed = None, False
    elif not rewards:
        trial.reward, trial.passed = 0.0, False
    else:
        trial.reward = scalar_reward(rewards)
        trial.passed = trial.reward >= 1.0
    if not task.steps:
        trial.steps = []


def run_suite(env, suite: Suite, agent: Agent, *, samples: int = 1, workers: int = 4,
              snapshots: SnapshotCache | None = None, options: TrialOptions = TrialOptions()) -> list[Trial]:
    """Every (task, sample) trial of a suite with `agent` (`policies.make_agent`), run on `workers` threads;
    results in (task, sample) order. `options.log_dir` is made if missing."""
    if samples < 1 or workers < 1:
        raise ValueError(f"samples={samples}, workers={workers}; expected both >= 1")
    snapshots = snapshots or SnapshotCache(env)
    if options.log_dir is not None:
        options = dataclasses.replace(options, log_dir=Path(options.log_dir))
        options.log_dir.mkdir(parents=True, exist_ok=True)
    jobs = [(task, s) for task in suite.tasks for s in range(samples)]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bench") as pool:
        futures = [pool.submit(run_trial, env, snapshots, task, s, agent, options) for task, s in jobs]
        return [f.result() for f in futures]


__all__ = ["SnapshotCache", "TaskError", "Trial", "TrialOptions", "run_suite", "run_trial"]
