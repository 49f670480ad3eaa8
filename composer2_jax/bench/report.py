"""Results of a run: a JSON record keyed by suite version, a Markdown report and a pass@k plot per category.

Layout under the output root:

    index.json                           {suite version: {agent: summary of its latest run}}
    <suite>/<agent>/<stamp>/results.json everything: config, per-trial rows, per task/category/difficulty stats
    <suite>/<agent>/<stamp>/report.md    the tables
    <suite>/<agent>/<stamp>/pass_at_k.png
    <suite>/<agent>/<stamp>/logs/        transcripts and verifier output per trial
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from composer2_jax.bench.metrics import aggregate
from composer2_jax.bench.task import Suite


def build_record(suite: Suite, agent: str, trials: Sequence[dict[str, Any]], ks: Sequence[int],
                 meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON record of one run."""
    return {"suite_version": suite.name, "agent": agent,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "samples_per_task": max((t["sample"] for t in trials), default=-1) + 1, "ks": list(ks),
            "meta": meta or {}, **aggregate(trials, ks),
            "unsupported": [{"task": u.name, "reason": u.reason} for u in suite.unsupported],
            "trials": list(trials)}


def pct(x: float | None) -> str:
    """A fraction as a percentage cell."""
    return "–" if x is None else f"{100 * x:.1f}"


def _table(title: str, rows: dict[str, dict[str, Any]], ks: Sequence[int], first: str) -> list[str]:
    """A Markdown table of group rows: tasks, pass@k, mean reward/turns/tool calls/tokens/wall."""
    head = [first, "tasks", "errors"] + [f"pass@{k} %" for k in ks] + ["reward", "turns", "tool calls", "tokens",
                                                                       "wall s"]
    lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in rows.items():
        cells = [name, str(r.get("tasks", "")), str(r.get("errors", 0))] + [pct(r.get(f"pass@{k}")) for k in ks]
        cells += [f"{r.get('mean_reward', 0):.2f}", f"{r.get('mean_turns', 0):.1f}",
                  f"{r.get('mean_tool_calls', 0):.1f}", f"{r.get('mean_generated_tokens', 0):.0f}",
                  f"{r.get('mean_wall_s', 0):.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def markdown(record: dict[str, Any]) -> str:
    """The Markdown report of a record."""
    ks = [k for k in record["ks"] if k <= record["samples_per_task"]]
    out = [f"# {record['agent']} on suite {record['suite_version']}", "",
           f"{len(record['tasks'])} tasks × {record['samples_per_task']} samples, {record['created']}.", ""]
    errored = {name: r for name, r in record["tasks"].items() if r.get("errors")}
    if errored:
        total = sum(r["errors"] for r in errored.values())
        out += [f"**{total} trial(s) of {len(errored)} task(s) ended in an error** (a crash, not a verdict): they "
                f"are left out of pass@k, which is '–' where no trial ran. First error per task:", ""]
        out += [f"- `{name}` ({r['errors']} errored): {r['first_error']}" for name, r in errored.items()] + [""]
    out += _table("Overall", {"all": record["overall"]}, ks, "suite")
    out += _table("By category", record["categories"], ks, "category")
    out += _table("By difficulty", record["difficulties"], ks, "difficulty")
    head = ["task", "category", "difficulty", "c/n", "errors"] + [f"pass@{k} %" for k in ks]
    head += ["turns", "tool calls", "tokens", "wall s"]
    out += ["### By task", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in record["tasks"].items():
        cells = [name, r["category"], r["difficulty"], f"{r['c']}/{r['n']}", str(r.get("errors", 0))]
        cells += [pct(r.get(f"pass@{k}")) for k in ks]
        cells += [f"{r['mean_turns']:.1f}", f"{r['mean_tool_calls']:.1f}", f"{r['mean_generated_tokens']:.0f}",
                  f"{r['mean_wall_s']:.1f}"]
        out.append("| " + " | ".join(cells) + " |")
    problems = [t for t in record["trials"] if t.get("error") or t.get("grade_error") or t.get("notes")]
    if problems:
        out += ["", "### Problems", ""]
        out += [f"- `{t['task']}#{t['sample']}`: " + "; ".join(x for x in (t.get("error"), t.get("grade_error"),
                                                                         t.get("notes")) if x) for t in problems]
    if record["unsupported"]:
        out += ["", "### Unsupported tasks", ""] + [f"- `{u['task']}`: {u['reason']}" for u in record["unsupported"]]
    return "\n".join(out) + "\n"


def plot(record: dict[str, Any], path: Path) -> None:
    """Bar chart of pass@k per category (and overall)."""
    import matplotlib  # deferred: plotting is optional for library users

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = [k for k in record["ks"] if k <= record["samples_per_task"]]
    groups = {**record["categories"], "overall": record["overall"]}
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(groups)), 3.5))
    width = 0.8 / max(1, len(ks))
    for j, k in enumerate(ks):
        xs = [i + j * width for i in range(len(groups))]
        ax.bar(xs, [100 * g.get(f"pass@{k}", 0) for g in groups.values()], width, label=f"pass@{k}")
    ax.set_xticks([i + width * (len(ks) - 1) / 2 for i in range(len(groups))], list(groups), rotation=20)
    ax.set_ylabel("%")
    ax.set_ylim(0, 100)
    ax.set_title(f"{record['agent']} on {record['suite_version']}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _update_index(root: Path, record: dict[str, Any], run_dir: Path) -> None:
    """Record this run as the latest of its agent under its suite version in root/index.json."""
    path = root / "index.json"
    index = json.loads(path.read_text()) if path.exists() else {}
    index.setdefault(record["suite_version"], {})[record["agent"]] = {
        "created": record["created"], "run_dir": os.path.relpath(run_dir, root), "overall": record["overall"],
        "trial_errors": sum(bool(t.get("error")) for t in record["trials"]),
        "categories": {c: {k: v for k, v in r.items() if k.startswith("pass@") or k == "tasks"}
                       for c, r in record["categories"].items()}}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(index, indent=1, sort_keys=True))
    os.replace(tmp, path)


def write_run(root: str | Path, run_dir: Path, record: dict[str, Any], with_plot: bool = True) -> dict[str, Path]:
    """Write results.json, report.md and the plot into run_dir and update root/index.json; the paths."""
    root = Path(root)
    run_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": run_dir / "results.json", "markdown": run_dir / "report.md"}
    paths["json"].write_text(json.dumps(record, indent=1))
    paths["markdown"].write_text(markdown(record))
    if with_plot:
        paths["plot"] = run_dir / "pass_at_k.png"
        plot(record, paths["plot"])
    _update_index(root, record, run_dir)
    return paths
