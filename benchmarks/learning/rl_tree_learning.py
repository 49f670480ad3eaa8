"""Plain vs tree groups under training (issue 18, item 4): held-out pass rate against generated tokens, JSON lines +
a plot.

    python -m benchmarks.learning.rl_tree_learning --init runs/bench_rl_learning/rl/sft/checkpoints --workdir DIR \
        [--modes plain,uniform,first_failure,entropy --seeds 0,1,2 --versions 40 --eval-every 10]

Every run starts from the same SFT checkpoint (`--init`, copied into the run's workdir, so no run trains its own)
and is `benchmarks/learning/rl_learning.py` — the toy RL experiment with whole episodes — in plain mode or in tree mode
with
one node-choice rule (rl/branching.py), `--versions` weight versions and a held-out evaluation every `--eval-every`.
Seeds set `config.seed` (trainer init and task sampler). The evaluations are the same in every mode (64 held-out
tasks × 2 samples, pass@1 at T = 1), so the curves are comparable against the tokens each run generated (rollouts
of training groups, `batch/tokens_spent` summed up to the evaluated version) and against the environment steps
(tool calls, `batch/turns` × episodes).

Per run one line: mode, seed, and per evaluation (version, tokens, pass rate). Per mode one summary line: the mean
curve over seeds and `tokens_to_plain_final` — the tokens at which the mode's mean curve (linearly interpolated)
first reaches the plain mode's final mean pass rate, and its ratio to plain's tokens (issue 18's goal: ≤ 0.6).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from composer2_jax.rl.plots import read_metrics

NODE_CHOICES = ("uniform", "first_failure", "entropy")


def run_curve(workdir: Path) -> list[dict]:
    """(version, cumulative generated tokens, env steps, held-out pass rate) at each evaluation of a finished run."""
    rows = read_metrics(workdir / "rl" / "logs" / "metrics.jsonl")
    batches = sorted((r for r in rows if "batch/tokens_spent" in r), key=lambda r: r["step"])
    evals = sorted((r for r in rows if "eval/pass_rate" in r), key=lambda r: r["step"])
    out = []
    for e in evals:
        upto = [b for b in batches if b["step"] <= e["step"]]
        out.append({"version": int(e["step"]), "tokens": float(sum(b["batch/tokens_spent"] for b in upto)),
                    "env_steps": float(sum(b["batch/turns"] * b["batch/episodes"] for b in upto)),
                    "pass_rate": float(e["eval/pass_rate"])})
    return out


def first_reach(tokens: np.ndarray, rate: np.ndarray, target: float) -> float | None:
    """The tokens at which a piecewise-linear curve first reaches `target` (None if it never does)."""
    for i in range(len(rate)):
        if rate[i] >= target:
            if i == 0:
                return float(tokens[0])
            t0, t1, r0, r1 = tokens[i - 1], tokens[i], rate[i - 1], rate[i]
            return float(t0 + (target - r0) / (r1 - r0) * (t1 - t0))
    return None


def summarize(curves: dict[str, list[list[dict]]]) -> list[dict]:
    """One line per mode: mean curve over seeds (by evaluation index) and tokens to plain's final pass rate."""
    means = {}
    for mode, runs in curves.items():
        n = min(len(c) for c in runs)
        means[mode] = {k: np.mean([[c[i][k] for i in range(n)] for c in runs], axis=0)
                       for k in ("version", "tokens", "env_steps", "pass_rate")}
    plain = means.get("plain")
    target = None if plain is None else float(plain["pass_rate"][-1])
    out = []
    for mode, m in means.items():
        reach = None if target is None else first_reach(m["tokens"], m["pass_rate"], target)
        spread = np.std([c[-1]["pass_rate"] for c in curves[mode]]) if len(curves[mode]) > 1 else 0.0
        out.append({"mode": mode, "seeds": len(curves[mode]), "versions": m["version"].tolist(),
                    "tokens": m["tokens"].round().tolist(), "env_steps": m["env_steps"].round().tolist(),
                    "pass_rate": m["pass_rate"].round(4).tolist(), "final_pass_std": round(float(spread), 4),
                    "plain_final_pass": target, "tokens_to_plain_final": reach,
                    "vs_plain_tokens": (None if reach is None or plain is None
                                        else round(reach / float(plain["tokens"][-1]), 3))})
    return out


def plot(curves: dict[str, list[list[dict]]], out_path: Path) -> None:
    """Held-out pass rate against generated tokens and against versions, one colour per mode, one line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for i, (mode, runs) in enumerate(curves.items()):
        for j, c in enumerate(runs):
            kw = dict(color=f"C{i}", marker="o", markersize=3, alpha=0.8, label=mode if j == 0 else None)
            axes[0].plot([p["tokens"] / 1e3 for p in c], [p["pass_rate"] for p in c], **kw)
            axes[1].plot([p["version"] for p in c], [p["pass_rate"] for p in c], **kw)
    axes[0].set_xlabel("generated tokens (thousands)")
    axes[1].set_xlabel("weight version")
    for ax in axes:
        ax.set_ylabel("held-out pass@1")
        ax.legend(fontsize=8)
    fig.suptitle("RL: plain vs tree groups")
    fig.tight_layout()
    fig.savefig(out_path, dpi=100)
    plt.close(fig)


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.learning.rl_tree_learning",
                                description=__doc__.splitlines()[0])
    p.add_argument("--init", required=True, help="an SFT checkpoint folder every run starts from")
    p.add_argument("--workdir", default="runs/bench_rl_tree_learning")
    p.add_argument("--modes", default="plain," + ",".join(NODE_CHOICES))
    p.add_argument("--seeds", default="0")
    p.add_argument("--versions", type=int, default=40)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--plot", default="", help="PNG path (default: WORKDIR/curves.png)")
    args, overrides = p.parse_known_args(argv)
    modes = args.modes.split(",")
    for m in modes:
        if m != "plain" and m not in NODE_CHOICES:
            raise SystemExit(f"--modes: {m!r}; expected plain or one of {NODE_CHOICES}")
    if not Path(args.init).is_dir():
        raise SystemExit(f"--init {args.init!r} is not a checkpoint folder")
    root = Path(args.workdir)
    curves: dict[str, list[list[dict]]] = {}
    for seed in [int(s) for s in args.seeds.split(",")]:
        for mode in modes:
            wd = root / f"{mode}-s{seed}"
            if not (wd / "rl" / "logs" / "metrics.jsonl").exists() or not run_curve(wd):
                shutil.rmtree(wd, ignore_errors=True)
                shutil.copytree(args.init, wd / "rl" / "sft" / "checkpoints")
                flags = [f"--workdir={wd}", f"--config.seed={seed}", f"--config.rl.steps={args.versions}",
                         f"--config.rl.eval_every={args.eval_every}", *overrides]
                if mode != "plain":
                    flags = ["--mode=tree", f"--node-choice={mode}", *flags]
                # a process per run: the experiment parses absl flags once per process
                subprocess.run([sys.executable, "-m", "benchmarks.learning.rl_learning", *flags], check=False)
            c = run_curve(wd)
            curves.setdefault(mode, []).append(c)
            print(json.dumps({"bench": "rl_tree_learning", "mode": mode, "seed": seed, "curve": c}), flush=True)
    lines = summarize(curves)
    for line in lines:
        print(json.dumps({"bench": "rl_tree_learning", "summary": True, **line}), flush=True)
    plot(curves, Path(args.plot) if args.plot else root / "curves.png")
    return lines


if __name__ == "__main__":
    main()
    sys.exit(0)
