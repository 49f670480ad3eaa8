"""SFT warm-start data: the oracle solves generated tasks through the real harness and sandboxes; its transcripts
become chat JSONL (`{"messages": [...]}` per line, the format `experiments/sft.py` reads).

The oracle is a scripted harness Policy (bench/policies.py ScriptedPolicy) replaying `rl.tasks.oracle_replies`: its
tool calls run in forked sandboxes and the observations in the transcript are the sandbox's real answers. Each
transcript is kept only if the hidden check passes on the final workspace — or, for an imperfect teacher
(`error_rate` > 0, `rl.tasks.teacher_op`), if it failed by the teacher's deliberate wrong operator: demonstrations
are then unverified, the errors part of the data. When the harness asks for a summary (the context passed its
budget) the oracle writes `rl.tasks.oracle_summary`: the line to fix, all the next context needs. Rendered with
`render_chat` (no BOS, the RL tool view's schemas), a transcript is token for token the context the RL harness
builds.

Harbor tasks (rl/sources.py HarborTask: workspace, image, compose, a step of a multi-step task) have no generated
oracle: `write_solution_transcripts` replays each task's solution/solve.sh as terminal tool calls (bench/policies.py's
oracle: solution/ uploaded, solve.sh run, submit) in the task's own sandbox, through the family's tools and harness,
and keeps the transcripts the task's verifier passes. `read_transcripts` checks a ready JSONL of transcripts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from composer2_jax.bench.policies import ScriptedPolicy, scripted_factory
from composer2_jax.bench.runner import step_view
from composer2_jax.rl import pkg_tasks
from composer2_jax.rl.services.env_worker import EnvWorker
from composer2_jax.rl.tasks import CodingTask, oracle_reads, oracle_replies, oracle_summary, teacher_flaws, teacher_op

log = logging.getLogger(__name__)


def oracle_record(worker: EnvWorker, task: CodingTask, read_prob: float, seed: int, error_rate: float = 0.0,
                  flaw_rates: Mapping[str, float] | None = None, retest: bool = False) -> dict:
    """One graded oracle episode as {"messages", "task_id", "difficulty", "read_first", "teacher_error",
    "teacher_flaws", "success"}; `flaw_rates` {flaw: probability} (rl.tasks.TEACHER_FLAWS). A task of the
    multi-module family (rl/pkg_tasks.py) gets that family's oracle: 2k + 2 turns, one wrong fix at `error_rate`;
    with `retest` the oracle re-runs the tests after each fix (`pkg_tasks.oracle_replies`). `retest` on another
    family is an OracleConfigError: only pkg's oracle runs tests."""
    if isinstance(task, pkg_tasks.PkgTask):
        ops = pkg_tasks.teacher_ops(task, error_rate, seed, retest)
        replies = _fitting(worker, task, pkg_tasks.oracle_replies(task, True, ops, retest=retest))
        policy = ScriptedPolicy(worker.tok, replies, worker.harness, summary=pkg_tasks.oracle_summary(task))
        messages: list[dict] = []
        record = worker.run(task, policy, admitted_version=0, transcript=messages)
        while messages and messages[-1]["role"] != "assistant":
            messages.pop()
        return {"messages": messages, "task_id": task.task_id, "difficulty": task.difficulty, "read_first": True,
                "teacher_error": any(op != task.right_op for op in ops), "teacher_flaws": [],
                "success": record.success, "turns": record.turns}
    if retest:
        raise OracleConfigError(f"retest=True for task {task.task_id!r} ({type(task).__name__}): only the pkg "
                                "family's oracle runs tests; expected a PkgTask (--config.tasks=pkg)")
    read = oracle_reads(task, read_prob, seed)
    op = teacher_op(task, error_rate, seed)
    flaws = teacher_flaws(task, dict(flaw_rates or {}), seed)
    policy = ScriptedPolicy(worker.tok, _fitting(worker, task, oracle_replies(task, read, op, flaws)), worker.harness,
                            summary=oracle_summary(task))
    messages: list[dict] = []
    record = worker.run(task, policy, admitted_version=0, transcript=messages)
    while messages and messages[-1]["role"] != "assistant":  # trailing observations carry no loss
        messages.pop()
    return {"messages": messages, "task_id": task.task_id, "difficulty": task.difficulty, "read_first": read,
            "teacher_error": op != task.right_op, "teacher_flaws": list(flaws), "success": record.success}


class OracleConfigError(ValueError):
    """The oracle cannot run as configured (a reply longer than the harness lets a reply be, `retest` on a family
    without tests): raised through the writer's catch-all, never counted as one lost transcript."""


def _fitting(worker: EnvWorker, task, replies: list[str]) -> list[str]:
    """The replies, if each fits one model reply (harness.max_new_tokens); else an OracleConfigError naming the
    longest: the harness would cut it like a model's and record a malformed call the oracle never meant."""
    ids = ScriptedPolicy(worker.tok, replies, worker.harness).reply_ids
    n, longest = max((len(ids(r)), r) for r in replies)
    if n > worker.harness.max_new_tokens:
        raise OracleConfigError(f"an oracle reply of {task.task_id} is {n} tokens, over harness.max_new_tokens="
                         f"{worker.harness.max_new_tokens} ({type(worker.tok).__name__}): {longest[:80]!r}…; expected "
                         "a budget that holds the oracle's replies (raise harness and rollout max_new_tokens)")
    return replies


def _safe_record(worker: EnvWorker, task: CodingTask, read_prob: float, seed: int, error_rate: float,
                 flaw_rates: Mapping[str, float] | None, retest: bool) -> dict | None:
    """oracle_record, or None when the sandbox failed (the transcript is then left out and counted)."""
    try:
        return oracle_record(worker, task, read_prob, seed, error_rate, flaw_rates, retest)
    except OracleConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - one broken sandbox must not stop the data generation
        log.warning("oracle episode of %s failed: %s: %s", task.task_id, type(e).__name__, e)
        return None


def write_oracle_transcripts(worker: EnvWorker, tasks: Sequence[CodingTask], path: str | Path, read_prob: float = 0.5,
                             seed: int = 0, threads: int = 8, error_rate: float = 0.0,
                             flaw_rates: Mapping[str, float] | None = None, retest: bool = False) -> dict[str, int]:
    """Write the oracle transcripts of `tasks` as chat JSONL: the passing ones, and the teacher's deliberate
    errors when `error_rate` > 0, each fix with the teacher's flaws drawn from `flaw_rates`; returns {written,
    teacher_errors, failed (neither), flaw/NAME (transcripts written with that flaw)}. `retest`: the pkg oracle
    re-runs the tests after each fix (`oracle_record`)."""
    with ThreadPoolExecutor(threads, thread_name_prefix="oracle") as pool:
        records = [r for r in pool.map(lambda t: _safe_record(worker, t, read_prob, seed, error_rate, flaw_rates,
                                                              retest), tasks) if r is not None]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = [r for r in records if r["success"] == (0.0 if r["teacher_error"] else 1.0)]
    with open(path, "w", encoding="utf-8") as f:
        for r in kept:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return {"written": len(kept), "teacher_errors": sum(r["teacher_error"] for r in kept),
            "failed": len(tasks) - len(kept),
            **{f"flaw/{name}": sum(name in r["teacher_flaws"] for r in kept) for name in sorted(flaw_rates or {})}}


def solution_record(worker: EnvWorker, task) -> dict:
    """One graded replay of a Harbor task's (or step's) solution/solve.sh as a transcript record."""
    _, harness = worker.family(task)
    policy = scripted_factory("oracle", worker.tok, harness)(step_view(task.task, task.run_step()))
    messages: list[dict] = []
    record = worker.run(task, policy, admitted_version=0, transcript=messages)
    while messages and messages[-1]["role"] != "assistant":
        messages.pop()
    return {"messages": messages, "task_id": task.task_id, "difficulty": task.difficulty, "success": record.success,
            "turns": record.turns}


def write_solution_transcripts(worker: EnvWorker, tasks: Sequence, path: str | Path, threads: int = 4
                               ) -> dict[str, int]:
    """Replay the solutions of Harbor `tasks` (those with a solution/solve.sh) and write the passing transcripts as
    chat JSONL; returns {written, failed, no_solution}."""
    runnable = [t for t in tasks if t.run_step().solution_dir is not None]

    def one(task):
        try:
            return solution_record(worker, task)
        except Exception as e:  # noqa: BLE001 - one broken sandbox must not stop the data generation
            log.warning("solution replay of %s failed: %s: %s", task.task_id, type(e).__name__, e)
            return None

    with ThreadPoolExecutor(threads, thread_name_prefix="solutions") as pool:
        records = [r for r in pool.map(one, runnable) if r is not None]
    kept = [r for r in records if r["success"] == 1.0]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for r in kept:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return {"written": len(kept), "failed": len(runnable) - len(kept), "no_solution": len(tasks) - len(runnable)}


def read_transcripts(path: str | Path) -> int:
    """The number of transcripts in a chat JSONL; ValueError naming the line that is not {"messages": [...]}."""
    count = 0
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                raise ValueError(f"{path}:{i}: not JSON ({e}); expected {{\"messages\": [...]}} per line") from None
            if not isinstance(row, dict) or not isinstance(row.get("messages"), list) or not row["messages"]:
                raise ValueError(f"{path}:{i}: expected {{\"messages\": [...]}} with at least one message")
            count += 1
    if count == 0:
        raise ValueError(f"{path} holds no transcripts; expected {{\"messages\": [...]}} per line")
    return count
