"""pass@k and the per-task / per-category / per-difficulty aggregates of a run.

pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", eq. 1): with n samples of a task of
which c pass, the unbiased estimate of the chance that at least one of k samples passes is

    pass@k = 1 − C(n − c, k) / C(n, k)  =  1 − Π_{i = n−c+1}^{n} (1 − k / i)

(the product form avoids huge binomials). A group's pass@k is the mean over its tasks.

A trial that crashed (its `error` is set: the agent or its engine raised, so no verdict exists) is an error, not a
failure: it is counted under `errors` (with the first message per task) and left out of n and c; a task whose
trials all crashed has no pass@k (None) and is left out of its groups' means.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct (Chen et al. 2021)."""
    if not 0 <= c <= n or n < 1:
        raise ValueError(f"pass_at_k(n={n}, c={c}): expected n >= 1 and 0 <= c <= n")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k: k={k} must be in 1..n={n} (draw at least k samples per task)")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


_MEANS = ("reward", "turns", "tool_calls", "malformed", "generated_tokens", "wall_s")


def task_stats(trials: Sequence[Mapping[str, Any]], ks: Sequence[int]) -> dict[str, Any]:
    """n, c (over the trials that ran), errors (trials that crashed) and the first error message, pass@k for each
    k <= n (None when too few ran), grade errors, and the mean of the per-trial counts, for one task's trials."""
    crashed = [t for t in trials if t.get("error")]
    ran = [t for t in trials if not t.get("error")]
    n, c = len(ran), sum(bool(t["passed"]) for t in ran)
    out: dict[str, Any] = {"n": n, "c": c, "errors": len(crashed),
                           "first_error": str(crashed[0]["error"])[:300] if crashed else None,
                           "grade_errors": sum(bool(t.get("grade_error")) for t in ran)}  # verifier gave no reward
    out.update({f"pass@{k}": pass_at_k(n, c, k) if k <= n else None for k in ks
                if k <= len(trials)})
    out.update({f"mean_{m}": sum(float(t.get(m) or 0) for t in trials) / len(trials) for m in _MEANS
                if m != "reward"})
    rewards = [float(t["reward"]) for t in trials if t.get("reward") is not None]
    out["mean_reward"] = sum(rewards) / len(rewards) if rewards else 0.0  # over the trials that have a reward
    return out


def group_stats(per_task: Mapping[str, Mapping[str, Any]], members: Iterable[str]) -> dict[str, Any]:
    """Mean over the member tasks of every pass@k (over the tasks that have one) and mean_* they all have; the task
    count and the errored trials."""
    rows = [per_task[m] for m in members]
    keys = [k for k in rows[0] if k.startswith(("pass@", "mean_")) and all(k in r for r in rows)] if rows else []
    out: dict[str, Any] = {"tasks": len(rows), "errors": sum(r.get("errors", 0) for r in rows)}
    for k in keys:
        vals = [r[k] for r in rows if r[k] is not None]
        out[k] = sum(vals) / len(vals) if vals else None
    return out


def aggregate(trials: Sequence[Mapping[str, Any]], ks: Sequence[int]) -> dict[str, Any]:
    """{"tasks": per task, "categories": per category, "difficulties": per difficulty, "overall": all}."""
    by_task: dict[str, list] = collections.defaultdict(list)
    for t in trials:
        by_task[t["task"]].append(t)
    per_task = {name: {"category": ts[0]["category"], "difficulty": ts[0]["difficulty"], **task_stats(ts, ks)}
                for name, ts in sorted(by_task.items())}
    groups: dict[str, dict[str, list]] = {"categories": collections.defaultdict(list),
                                          "difficulties": collections.defaultdict(list)}
    for name, row in per_task.items():
        groups["categories"][row["category"]].append(name)
        groups["difficulties"][row["difficulty"]].append(name)
    return {"tasks": per_task,
            "categories": {g: group_stats(per_task, m) for g, m in sorted(groups["categories"].items())},
            "difficulties": {g: group_stats(per_task, m) for g, m in sorted(groups["difficulties"].items())},
            "overall": group_stats(per_task, list(per_task))}
