"""Run an agent on a suite: one sandbox per (task, sample) forked from the task's imported repository, the harness
drives the agent, the hidden tests grade a fresh fork of the final workspace; trials run in parallel threads.

Each task's repository is imported into the environment once (a snapshot) and every trial forks it, so a trial
costs a fork (milliseconds) regardless of repository size. A trial that crashes is recorded with its error and
reward 0; it never stops the run.
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

from composer2_jax.bench.grade import grade
from composer2_jax.bench.task import Suite, Task
from composer2_jax.data import tokenizer as tk
from composer2_jax.env.harness import EpisodeResult, HarnessConfig, Policy, run_episode, transcript_jsonl

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Trial:
    """One episode of one task and its grade."""

    task: str
    category: str
    difficulty: str
    sample: int
    reward: float = 0.0
    passed: bool = False
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
    grade_error: str | None = None  # why the verifier produced no reward
    error: str | None = None  # why the trial itself failed (harness or sandbox crash)
    notes: str = ""  # e.g. the malformed-call report
    log: str | None = None  # transcript file

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return dataclasses.asdict(self)


class SnapshotCache:
    """One imported snapshot per task, shared by every trial (and by several runs on the same environment)."""

    def __init__(self, env, cache_dir: str | Path | None = None):
        self.env, self.cache_dir = env, cache_dir
        self._snaps: dict[str, str] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, task: Task) -> str:
        """The snapshot id of the task's starting repository (imported on first use)."""
        with self._lock:
            lock = self._locks.setdefault(task.name, threading.Lock())
        with lock:
            if task.name not in self._snaps:
                self._snaps[task.name] = self.env.import_repo(task.repo_dir(self.cache_dir))
            return self._snaps[task.name]


def _fill_from_episode(trial: Trial, result: EpisodeResult) -> None:
    """Copy the episode's counts into the trial."""
    trial.stop_reason, trial.turns, trial.tool_calls = result.stop_reason, result.turns, len(result.tool_calls)
    trial.malformed, trial.generated_tokens = result.malformed, result.generated_tokens
    trial.observation_tokens, trial.summaries = result.observation_tokens, result.summaries
    trial.agent_wall_s = result.wall_s
    trial.notes = result.malformed_report()


def run_trial(env, snapshots: SnapshotCache, task: Task, sample: int, policy: Policy, tokenizer: tk.Tokenizer,
              config: HarnessConfig, log_dir: Path | None = None,
              on_episode: Callable[[Task, EpisodeResult], None] | None = None) -> Trial:
    """Fork the task's snapshot, run the agent, grade the final workspace; never raises."""
    trial = Trial(task.name, task.category, task.difficulty, sample)
    start, sid = time.monotonic(), None
    try:
        sid = env.fork(snapshots.get(task), policy=task.config.network_policy)
        cfg = dataclasses.replace(config, timeout_s=min(config.timeout_s or float("inf"), task.config.agent_timeout_s))
        result = run_episode(env, sid, task.instruction, policy, tokenizer, cfg, task_id=task.name, group_id=task.name)
        _fill_from_episode(trial, result)
        if log_dir is not None:
            path = log_dir / f"{task.name}.{sample}.jsonl"
            path.write_text(transcript_jsonl(result))
            trial.log = str(path)
        if on_episode is not None:
            on_episode(task, result)
        g = grade(env, sid, task)
        trial.reward, trial.passed, trial.grade_error, trial.grade_wall_s = g.reward, g.passed, g.error, g.wall_s
        if log_dir is not None:
            (log_dir / f"{task.name}.{sample}.verifier.txt").write_text(g.output)
    except Exception as e:  # noqa: BLE001 - one broken trial must not stop a suite run
        trial.error = f"{type(e).__name__}: {e}"
        log.error("trial %s#%d failed: %s\n%s", task.name, sample, trial.error, traceback.format_exc())
    finally:
        if sid is not None:
            try:
                env.close(sid)
            except KeyError:
                pass
    trial.wall_s = time.monotonic() - start
    if trial.notes:
        log.warning("%s#%d: %s", task.name, sample, trial.notes)
    return trial


def run_suite(env, suite: Suite, factory: Callable[[Task], Policy], *, samples: int = 1, workers: int = 4,
              tokenizer: tk.Tokenizer | None = None, config: HarnessConfig = HarnessConfig(),
              log_dir: str | Path | None = None, snapshots: SnapshotCache | None = None,
              on_episode: Callable[[Task, EpisodeResult], None] | None = None) -> list[Trial]:
    """Every (task, sample) trial of a suite, run on `workers` threads; results in (task, sample) order."""
    if samples < 1 or workers < 1:
        raise ValueError(f"samples={samples}, workers={workers}; expected both >= 1")
    tokenizer = tokenizer or tk.ByteTokenizer()
    snapshots = snapshots or SnapshotCache(env)
    logs = Path(log_dir) if log_dir is not None else None
    if logs is not None:
        logs.mkdir(parents=True, exist_ok=True)
    jobs = [(task, s) for task in suite.tasks for s in range(samples)]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bench") as pool:
        futures = [pool.submit(run_trial, env, snapshots, task, s, factory(task), tokenizer, config, logs, on_episode)
                   for task, s in jobs]
        return [f.result() for f in futures]
