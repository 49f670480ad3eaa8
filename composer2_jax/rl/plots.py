"""Learning-curve plots of an RL run from its metrics.jsonl: reward, pass rate, effort and the auxiliary reward terms
per weight version."""

from __future__ import annotations

import json
from pathlib import Path

from composer2_jax.rl.rewards import TERMS

PANELS = (
    ("reward", ("batch/reward", "batch/reward/easy", "batch/reward/hard", "eval/reward")),
    ("pass rate", ("batch/pass_rate/easy", "batch/pass_rate/hard", "eval/pass_rate", "eval/pass_rate/easy",
                   "eval/pass_rate/hard")),
    ("effort (token-equivalents)", ("batch/effort/easy", "batch/effort/hard", "eval/effort/easy",
                                    "eval/effort/hard")),
    ("reward terms (batch mean)", tuple(f"batch/term/{t}" for t in TERMS if t != "success")),
)


def read_metrics(path: str | Path) -> list[dict]:
    """The JSON lines of a metrics file."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def series(rows: list[dict], key: str) -> tuple[list[float], list[float]]:
    """(versions, values) of the rows that carry `key`."""
    pts = [(r["step"], r[key]) for r in rows if key in r]
    return [p[0] for p in pts], [p[1] for p in pts]


def plot_curves(metrics_path: str | Path, out_path: str | Path, title: str = "RL") -> Path:
    """The PANELS (reward, pass rate, effort, reward terms) against the weight version; returns the PNG path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(metrics_path)
    fig, axes = plt.subplots(1, len(PANELS), figsize=(5 * len(PANELS), 3.6))
    for ax, (name, keys) in zip(axes, PANELS):
        for key in keys:
            x, y = series(rows, key)
            if x:
                ax.plot(x, y, marker="o" if key.startswith("eval/") else None, markersize=3, label=key)
        ax.set_title(name)
        ax.set_xlabel("weight version")
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    out = Path(out_path)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
