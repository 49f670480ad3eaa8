"""Episode rewards: task success from hidden tests − a concave effort penalty + auxiliary rewards.

R = w·success − λ·gate·C(x) + Σ aux,  C(x) = ((1+kx)^(1−q) − 1) / (k(1−q))  (ln(1+kx)/k at q = 1),
x = the weighted effort of the episode. Every component is returned separately in a `RewardBreakdown`.

The terms (`TERMS`), each with its weight in `RewardConfig`, and what it reads from the `EpisodeOutcome`:

    success             +success_coef · s              s ∈ [0, 1] from the hidden check's verdict (tests)
    length_penalty      −penalty_coef · gate · C(x)    x from the effort counts (tokens, tool calls, turns)
    readability         −lint_coef · n                 n lint findings the change adds (files before/after, ruff)
    todos               −todo_coef · n                 n todo_write items left pending or in_progress (todos)
    todo_comments       −todo_comment_coef · n         n TODO/FIXME comments on added lines (the diff)
    invalid_tool_calls  −invalid_tool_call_coef · n    n malformed tool calls (tool_call_errors or tool_calls)
    clarity             −clarity_coef · p              p ∈ [0, 1] repetition and excess of thinking over answer
    denied_egress       −denied_egress_coef · n        n requests the egress policy refused (egress log)

Why this shape:
- Success dominates: the hidden tests are the only verifiable signal; everything else shapes *how* to succeed.
- Concave penalty, C′(x) = (1+kx)^(−q) decreasing in x: an extra token costs most on short (easy) episodes and
  less on long (hard) ones, so the policy learns to answer easy tasks quickly without being pushed to cut
  corners on hard tasks that genuinely need a long search. q = 0 is a linear penalty λ·x; larger q flattens
  faster. Group-relative advantages subtract the group mean, so only effort *differences* between rollouts of
  one task matter: the penalty ranks a cheap success above an expensive one for the same task.
- gate: `penalty_on="success"` (default) charges effort only to successful episodes. Charging failures too
  makes a quick give-up the best failure (a failure with no effort out-scores a long honest attempt), which
  on hard tasks, where most rollouts fail, teaches the policy to quit. `"all"` charges every episode (a
  compute budget that binds regardless of outcome). With "success", pick λ so that λ·C(x_max) < 1, else an
  expensive success scores below a failure.
- Auxiliary rewards are small, bounded per-episode penalties for things the tests cannot see: lint findings
  the change introduces, TODOs left behind, malformed tool calls, degenerate (repetitive, bloated) reasoning.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from composer2_jax.episode import MODEL_ROLES, Episode

Array = jax.Array

SUCCESS_MODES = ("binary", "fraction")
PENALTY_GATES = ("success", "all")
# todo_write statuses: composer2_jax.env.tool_schemas.TODO_STATUSES uses "done"; "completed"/"cancelled" are the
# other spellings agent harnesses use. Cancelled items were resolved explicitly by the agent.
DONE_TODO_STATUSES = ("done", "completed", "cancelled")
KNOWN_TODO_STATUSES = ("pending", "in_progress") + DONE_TODO_STATUSES
# The signed terms of the reward, in the order they are summed and logged (the module docstring says each one).
TERMS = ("success", "length_penalty", "readability", "todos", "todo_comments", "invalid_tool_calls", "clarity",
         "denied_egress")
# The raw measurements behind the auxiliary terms (RewardBreakdown fields), logged whatever the terms' weights.
MEASURES = ("lint_findings", "unfinished_todos", "n_todo_comments", "n_invalid_tool_calls", "clarity_penalty",
            "n_denied_egress")


# ---------------------------------------------------------------------------------------------------- success


@dataclasses.dataclass(frozen=True)
class TestResult:
    """Counts from running the hidden tests on the final repository state."""

    __test__ = False  # not a pytest test class

    passed: int
    failed: int
    errors: int = 0  # tests that could not run (collection/import errors, timeouts)

    def __post_init__(self):
        for name in ("passed", "failed", "errors"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"TestResult.{name} must be a non-negative int, got {value!r}")

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any]) -> TestResult:
        """From {"passed": int, "failed": int, "errors": int (optional)}."""
        missing = {"passed", "failed"} - set(d)
        if missing:
            raise ValueError(f"test result {dict(d)!r} lacks {sorted(missing)}; expected passed, failed[, errors]")
        return cls(int(d["passed"]), int(d["failed"]), int(d.get("errors", 0)))


def task_success(result: TestResult | Mapping[str, Any], mode: str = "binary") -> float:
    """Success in [0, 1]: "binary" 1 iff ≥ 1 test ran and none failed or errored; "fraction" passed / total."""
    if mode not in SUCCESS_MODES:
        raise ValueError(f"unknown success mode {mode!r}; expected one of {SUCCESS_MODES}")
    r = result if isinstance(result, TestResult) else TestResult.from_mapping(result)
    total = r.passed + r.failed + r.errors
    if mode == "binary":
        return float(total > 0 and r.passed == total)
    return r.passed / total if total else 0.0


# ----------------------------------------------------------------------------------------------- effort penalty


@dataclasses.dataclass(frozen=True)
class EffortCounts:
    """What an episode spent; tokens are the model's own except tool outputs (observations it caused)."""

    thinking_tokens: int = 0
    tool_call_tokens: int = 0
    tool_output_tokens: int = 0
    final_message_tokens: int = 0
    tool_calls: int = 0
    turns: int = 0


@dataclasses.dataclass(frozen=True)
class EffortWeights:
    """Weights of x = Σ weight·count, in token-equivalents."""

    thinking_tokens: float = 1.0  # generated reasoning: the bulk of decode time
    tool_call_tokens: float = 1.0  # generated tool-call arguments (edits, commands)
    tool_output_tokens: float = 0.1  # observations: prefill, ~10x cheaper than decode, but they fill the context
    final_message_tokens: float = 1.0  # the answer to the user
    tool_calls: float = 50.0  # per call: sandbox latency and a round trip through the harness
    turns: float = 20.0  # per model turn: one more prefill of the growing context


def effort(counts: EffortCounts, weights: EffortWeights = EffortWeights()) -> float:
    """x = Σ_f weights.f · counts.f over the six effort fields."""
    total = 0.0
    for f in dataclasses.fields(EffortCounts):
        count = getattr(counts, f.name)
        if count < 0:
            raise ValueError(f"EffortCounts.{f.name} must be ≥ 0, got {count}")
        total += getattr(weights, f.name) * count
    return total


def effort_counts_from_episode(episode: Episode) -> EffortCounts:
    """EffortCounts of an Episode from its turn roles (summaries count as thinking; a turn is one maximal run of
    model turns between observations)."""
    counts = collections.Counter()
    for seg in episode.segments:
        prev_model = False
        for t in seg.turns:
            is_model = t.role in MODEL_ROLES
            counts["turns"] += is_model and not prev_model
            prev_model = is_model
            counts[t.role] += len(t.tokens)
            counts["tool_calls"] += t.role == "tool_call"
    return EffortCounts(
        thinking_tokens=counts["thinking"] + counts["summary"],
        tool_call_tokens=counts["tool_call"],
        tool_output_tokens=counts["tool_output"],
        final_message_tokens=counts["message"],
        tool_calls=counts["tool_calls"],
        turns=counts["turns"],
    )


def length_penalty(x: float | Array, k: float, q: float) -> Array:
    """Concave effort penalty C(x) = ((1+kx)^(1−q) − 1) / (k(1−q)), ln(1+kx)/k at q = 1 (docs/design.md).

    Computed as expm1((1−q)·log1p(kx)) / (k(1−q)), accurate for q near 1, where the naive form cancels;
    C(0) = 0, C′(x) = (1+kx)^(−q) > 0, C″ ≤ 0 for q ≥ 0. Differentiable in x (and q), q = 1 included.
    """
    x = jnp.asarray(x, jnp.float32)
    u = jnp.log1p(k * x)  # ln(1 + kx)
    a = 1.0 - jnp.asarray(q, jnp.float32)
    small = a == 0
    a_safe = jnp.where(small, 1.0, a)
    return jnp.where(small, u / k, jnp.expm1(a_safe * u) / (k * a_safe))


# --------------------------------------------------------------------------------------------- auxiliary rewards


def ruff_available() -> bool:
    """Whether the ruff package is installed in this interpreter."""
    return importlib.util.find_spec("ruff") is not None


@functools.cache
def _ruff_command() -> tuple[str, ...]:
    """The installed package's ruff binary (a fraction of `python -m ruff`'s start-up per call; measured figures:
    docs/rl.md, "Reward terms"), or `python -m ruff` when the package does not expose it."""
    try:
        from ruff.__main__ import find_ruff_bin

        return (os.fspath(find_ruff_bin()),)
    except (ImportError, FileNotFoundError):
        return (sys.executable, "-m", "ruff")


def _ruff_counts(root: str, files: Sequence[str], select: Sequence[str]) -> collections.Counter:
    """Findings per file (path relative to root) from `ruff check` on the given files under root.

    Files are passed explicitly, so ruff's default excludes (venv/, node_modules/, .git/, …) hide none of them.
    """
    if not ruff_available():
        raise RuntimeError("the readability reward needs ruff: `pip install ruff` (or set reward.lint_coef = 0)")
    cmd = [*_ruff_command(), "check", "--isolated", "--no-cache", "--exit-zero",
           "--output-format", "json", "--select", ",".join(select), *files]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=root)
    if proc.returncode != 0:
        raise RuntimeError(f"ruff failed (exit {proc.returncode}): {proc.stderr.strip()[:500]}")
    findings = json.loads(proc.stdout or "[]")
    return collections.Counter(os.path.relpath(f["filename"], root) for f in findings)


def _write_tree(root: str, files: Mapping[str, str | None]) -> None:
    """Write {relative path: text} under root; None (an absent file) writes nothing."""
    for rel, text in files.items():
        if text is None:
            continue
        if os.path.isabs(rel) or ".." in rel.split("/"):
            raise ValueError(f"file path {rel!r} must be relative and stay inside the repository")
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)


def lint_findings_added(
    before: Mapping[str, str | None],
    after: Mapping[str, str | None],
    select: Sequence[str] = ("E", "F", "W", "C90"),
) -> int:
    """Lint findings the change introduced: Σ over changed .py files of max(0, findings_after − findings_before).

    before/after map a changed file's repository path to its text (None: absent on that side, i.e. created or
    deleted). Ruff (`ruff check --isolated`, rules `select`) runs once on both trees. Clamped per
    file so fixing old findings cannot buy credit for new ones elsewhere, nor reward unrelated lint churn.
    """
    paths = sorted(p for p in set(before) | set(after) if p.endswith(".py"))
    if not paths:
        return 0
    with tempfile.TemporaryDirectory(prefix="lint_delta_") as tmp:
        tmp = os.path.realpath(tmp)  # ruff reports resolved paths
        files = []
        for side, texts in (("before", before), ("after", after)):
            present = {p: texts.get(p) for p in paths if texts.get(p) is not None}
            _write_tree(os.path.join(tmp, side), present)
            files += [os.path.join(side, p) for p in present]
        counts = _ruff_counts(tmp, files, select) if files else collections.Counter()
    return sum(max(0, counts[os.path.join("after", p)] - counts[os.path.join("before", p)]) for p in paths)


def unfinished_todos(todos: Sequence[Mapping[str, Any]]) -> int:
    """Plan items from the agent's todo_write tool never resolved: status pending or in_progress."""
    n = 0
    for i, item in enumerate(todos):
        if not isinstance(item, Mapping) or "status" not in item:
            raise ValueError(f"todo item {i} is {item!r}; expected a dict with 'content' and 'status'")
        if item["status"] not in KNOWN_TODO_STATUSES:
            raise ValueError(f"todo item {i} has status {item['status']!r}; expected one of {KNOWN_TODO_STATUSES}")
        n += item["status"] not in DONE_TODO_STATUSES
    return n


_HUNK_RE = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_TODO_COMMENT_RE = re.compile(r"(#|//|/\*|<!--|--|;)\s*(TODO|FIXME)\b")


def diff_changed_lines(diff: str) -> tuple[list[str], list[str]]:
    """(added lines, removed lines) of a unified diff, without their +/- prefix; headers are skipped by
    following each hunk's line counts, so a '+++' header is never taken for content."""
    added, removed = [], []
    old_left = new_left = 0
    for line in diff.splitlines():
        if old_left <= 0 and new_left <= 0:
            m = _HUNK_RE.match(line)
            if m:
                old_left = int(m.group(1) or 1)
                new_left = int(m.group(2) or 1)
            continue
        if line.startswith("+"):
            added.append(line[1:])
            new_left -= 1
        elif line.startswith("-"):
            removed.append(line[1:])
            old_left -= 1
        elif line.startswith("\\"):  # "\ No newline at end of file"
            continue
        else:
            old_left, new_left = old_left - 1, new_left - 1
    return added, removed


def added_todo_comments(diff: str) -> int:
    """Upper-case TODO/FIXME comments (after #, //, /*, <!--, --, ;) on added lines of a unified diff, net of
    identical ones removed (moved or re-indented lines are not new)."""
    added, removed = diff_changed_lines(diff)
    removed_todos = collections.Counter(s.strip() for s in removed if _TODO_COMMENT_RE.search(s))
    n = 0
    for s in added:
        if not _TODO_COMMENT_RE.search(s):
            continue
        if removed_todos[s.strip()] > 0:
            removed_todos[s.strip()] -= 1
        else:
            n += 1
    return n


def is_valid_tool_call(call: Any, tool_names: Sequence[str] | None = None) -> bool:
    """A call is {"name": known tool, "arguments": dict or a JSON-object string}."""
    if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
        return False
    if tool_names is not None and call["name"] not in tool_names:
        return False
    args = call.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return False
    return isinstance(args, Mapping)


def count_invalid_tool_calls(calls: Sequence[Any], tool_names: Sequence[str] | None = None) -> int:
    """Number of malformed tool calls (see `is_valid_tool_call`)."""
    return sum(not is_valid_tool_call(c, tool_names) for c in calls)


# Error kinds of composer2_jax.env.observation.Observation that mean the call itself was malformed (as opposed
# to a well-formed call that failed, e.g. not_found or timeout, which is the model's business, not a format error).
MALFORMED_CALL_ERRORS = ("bad_json", "unknown_tool", "invalid_arguments")


def count_malformed_errors(error_kinds: Sequence[str | None]) -> int:
    """Number of tool results whose error kind says the call was malformed (None = the call succeeded)."""
    return sum(kind in MALFORMED_CALL_ERRORS for kind in error_kinds)


def repetition_ratio(text: str, n: int = 4) -> float:
    """1 − unique/total over the whitespace-word n-grams: 0 without repeats, → 1 for a loop, 0 if < n words."""
    if n < 1:
        raise ValueError(f"n-gram size must be ≥ 1, got {n}")
    words = text.split()
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    return 1.0 - len(set(grams)) / len(grams) if grams else 0.0


def excess_thinking(thinking: str, final: str, max_ratio: float = 20.0) -> float:
    """In [0, 1): the share of thinking words beyond max_ratio × the final message's words (at least 1)."""
    ratio = len(thinking.split()) / max(1, len(final.split()))
    return max(0.0, 1.0 - max_ratio / ratio) if ratio > 0 else 0.0


def clarity_penalty(thinking: str, final: str, n: int = 4, max_ratio: float = 20.0) -> float:
    """Cheap, deterministic proxy for unclear reasoning, in [0, 1]: ½·(repetition_ratio + excess_thinking).

    Degenerate loops (the same n-grams over and over) and thinking that dwarfs its answer are the measurable
    failure modes; both are pure functions of the text (whitespace words, no tokenizer, no model).
    """
    return 0.5 * (repetition_ratio(thinking, n) + excess_thinking(thinking, final, max_ratio))


# --------------------------------------------------------------------------------------------------- combination


@dataclasses.dataclass(frozen=True)
class RewardConfig:
    """Coefficients of R = success − λ·gate·C(x) + Σ aux (see the module docstring for the reasoning)."""

    success_mode: str = "binary"  # "binary" (all hidden tests pass) or "fraction" (share passed)
    penalty_coef: float = 1e-4  # λ: the penalty is λ·C(x); with k, q below λ·C(10⁵ token-equivalents) ≈ 0.46
    penalty_k: float = 1e-3  # k: effort scale, 1/k token-equivalents is where concavity sets in
    penalty_q: float = 1.0  # q: curvature; 0 linear, 1 logarithmic, > 1 saturating at 1/(k(q−1))
    penalty_on: str = "success"  # "success": charge effort to successes only; "all": to every episode
    effort_weights: EffortWeights = EffortWeights()  # x = Σ weight·count over the effort counts (token-equivalents)
    success_coef: float = 1.0  # weight of the hidden check's success s ∈ [0, 1]
    lint_coef: float = 0.02  # per lint finding the change introduces
    todo_coef: float = 0.02  # per todo_write item left pending or in_progress
    todo_comment_coef: float = 0.02  # per TODO/FIXME comment the change adds
    invalid_tool_call_coef: float = 0.05  # per malformed tool call
    clarity_coef: float = 0.05  # times clarity_penalty ∈ [0, 1]
    denied_egress_coef: float = 0.02  # per network request the egress policy refused
    clarity_ngram: int = 4  # n of the repetition ratio
    max_think_ratio: float = 20.0  # thinking words allowed per final-message word before excess counts
    lint_select: tuple[str, ...] = ("E", "F", "W", "C90")  # ruff rule prefixes of the readability reward
    # measure every term's input even at weight 0 (ruff then runs on every episode; its cost: docs/rl.md, "Reward
    # terms"): an ablation with a term off still logs the behaviour the term would have judged (records.term_stats
    # `measure/...`)
    measure_all: bool = False

    def __post_init__(self):
        if self.success_mode not in SUCCESS_MODES:
            raise ValueError(f"unknown success_mode {self.success_mode!r}; expected one of {SUCCESS_MODES}")
        if self.penalty_on not in PENALTY_GATES:
            raise ValueError(f"unknown penalty_on {self.penalty_on!r}; expected one of {PENALTY_GATES}")
        if self.penalty_k <= 0 or self.penalty_q < 0 or self.penalty_coef < 0:
            raise ValueError(
                f"need k > 0, q ≥ 0, λ ≥ 0; got k={self.penalty_k}, q={self.penalty_q}, λ={self.penalty_coef}"
            )
        for name in ("success_coef", "lint_coef", "todo_coef", "todo_comment_coef", "invalid_tool_call_coef",
                     "clarity_coef", "denied_egress_coef"):
            if getattr(self, name) < 0:
                raise ValueError(f"RewardConfig.{name}={getattr(self, name)}; expected ≥ 0 (the sign is the term's)")


@dataclasses.dataclass(frozen=True)
class EpisodeOutcome:
    """Everything the reward reads about one finished episode; optional parts default to 'nothing to judge'."""

    tests: TestResult | Mapping[str, Any]
    effort: EffortCounts = EffortCounts()
    todos: Sequence[Mapping[str, Any]] = ()  # the final todo_write list [{content, status}]
    diff: str = ""  # unified diff of the change
    files_before: Mapping[str, str | None] | None = None  # changed files' text before (None: skip lint)
    files_after: Mapping[str, str | None] | None = None  # ... and after
    tool_calls: Sequence[Any] = ()  # every tool call the model emitted, as parsed by the harness, or …
    tool_names: Sequence[str] | None = None  # the tools offered (None: any name is accepted)
    tool_call_errors: Sequence[str | None] = ()  # … the harness's Observation.error per call instead
    thinking: str = ""  # all reasoning text of the episode
    final_message: str = ""  # the final answer to the user
    egress: Sequence[Mapping[str, Any]] = ()  # the sandbox's egress events ({"allowed": bool, "host", ...} each)
    todo_history: Sequence[Sequence[Mapping[str, Any]]] = ()  # the list after each todo_write (logged, not scored)


@dataclasses.dataclass(frozen=True)
class RewardBreakdown:
    """Each reward component as it enters the total (signed), the raw measurements, and the total."""

    success: float
    length_penalty: float  # −λ·gate·C(x)
    readability: float  # −lint_coef·lint_findings
    todos: float  # −todo_coef·unfinished_todos
    todo_comments: float  # −todo_comment_coef·n_todo_comments
    invalid_tool_calls: float  # −invalid_tool_call_coef·n_invalid_tool_calls
    clarity: float  # −clarity_coef·clarity_penalty
    denied_egress: float  # −denied_egress_coef·n_denied_egress
    total: float
    effort: float  # x
    lint_findings: int
    unfinished_todos: int
    n_todo_comments: int
    n_invalid_tool_calls: int
    clarity_penalty: float
    n_denied_egress: int

    def as_dict(self, prefix: str = "reward/") -> dict[str, float]:
        """Flat {prefix + field: value} for the metrics logger."""
        return {prefix + k: float(v) for k, v in dataclasses.asdict(self).items()}


def denied_requests(events: Sequence[Mapping[str, Any]]) -> int:
    """Egress events the policy refused (composer2_jax.env.egress_policy.EgressEvent.to_dict() each)."""
    for i, e in enumerate(events):
        if not isinstance(e, Mapping) or not isinstance(e.get("allowed"), bool):
            raise ValueError(f"egress event {i} is {e!r}; expected a dict with a bool 'allowed'")
    return sum(not e["allowed"] for e in events)


def compute_reward(outcome: EpisodeOutcome, cfg: RewardConfig = RewardConfig()) -> RewardBreakdown:
    """R = the sum of the signed `TERMS` (module docstring), each returned and logged."""
    success = task_success(outcome.tests, cfg.success_mode)
    x = effort(outcome.effort, cfg.effort_weights)
    gate = success if cfg.penalty_on == "success" else 1.0
    penalty = -cfg.penalty_coef * gate * float(length_penalty(x, cfg.penalty_k, cfg.penalty_q))
    lint = 0
    if outcome.files_before is not None or outcome.files_after is not None:
        lint = lint_findings_added(outcome.files_before or {}, outcome.files_after or {}, cfg.lint_select)
    n_todo, n_todo_comments = unfinished_todos(outcome.todos), added_todo_comments(outcome.diff)
    if outcome.tool_calls and outcome.tool_call_errors:
        raise ValueError("give tool_calls or tool_call_errors, not both: the same calls would be counted twice")
    n_invalid = count_invalid_tool_calls(outcome.tool_calls, outcome.tool_names)
    n_invalid += count_malformed_errors(outcome.tool_call_errors)
    clarity = clarity_penalty(outcome.thinking, outcome.final_message, cfg.clarity_ngram, cfg.max_think_ratio)
    n_denied = denied_requests(outcome.egress)
    parts = {
        "success": cfg.success_coef * success,
        "length_penalty": penalty,
        "readability": -cfg.lint_coef * lint,
        "todos": -cfg.todo_coef * n_todo,
        "todo_comments": -cfg.todo_comment_coef * n_todo_comments,
        "invalid_tool_calls": -cfg.invalid_tool_call_coef * n_invalid,
        "clarity": -cfg.clarity_coef * clarity,
        "denied_egress": -cfg.denied_egress_coef * n_denied,
    }
    total = math.fsum(parts.values())
    return RewardBreakdown(**parts, total=total, effort=x, lint_findings=lint, unfinished_todos=n_todo,
                           n_todo_comments=n_todo_comments, n_invalid_tool_calls=n_invalid, clarity_penalty=clarity,
                           n_denied_egress=n_denied)
