"""Ablation of the readability (lint) and TODO-comment reward terms on the toy (issue 17, item 5c), JSON lines.

    python -m benchmarks.learning.rl_ablation --workdir runs/bench_rl_ablation [--versions 40] [--coef 0.25]
        [--sft-from runs/bench_rl_learning/rl/sft/checkpoints --sft-steps 60 --transcripts 300]

One SFT warm start from an imperfect teacher whose fixes carry habits the hidden check cannot see (rl.tasks
TEACHER_FLAWS: a useless semicolon, ruff E703, on `--teacher-lint` of the demonstrations; a TODO comment on
`--teacher-todo`) — from scratch, or `--sft-steps` more steps from the toy's warm start at `--sft-from` (the one
benchmarks/learning/rl_learning.py trains) — then two RL runs from that same start, with
benchmarks/learning/rl_learning.py's harness
(whole episodes, no summaries), identical but for two weights: `on` sets
reward.lint_coef = reward.todo_comment_coef = `--coef`, `off` sets both to 0. Both measure every term's input
(reward.measure_all), so the training batches log how often an episode adds a lint finding or a TODO comment
(`batch/measure_nonzero/...`) whether or not the reward sees it. One line per run: those fractions and the pass
rate over the first and last `--window` versions, and the held-out pass@1 at the start and the end; a last line
compares them. The terms change behaviour when `on` ends with fewer flawed episodes than `off`.

The ablation weight is larger than the default 0.02 per finding (rl/rewards.py): at 0.02 a flaw moves a
group-relative advantage by ~1/40 of a success, too little to show within a few dozen versions of the toy.
Needs bubblewrap and setpriv (as the RL tests do).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.learning.rl_learning import WHOLE_EPISODES
from composer2_jax.rl.plots import read_metrics

FLAWS = {"lint": "lint_findings", "todo_comment": "n_todo_comments"}  # teacher flaw -> the measurement that sees it


def window_means(rows: list[dict], window: int) -> dict[str, float]:
    """Mean over the first and the last `window` versions of the flaw fractions and the pass rate."""
    out = {}
    for name, measure in [*FLAWS.items(), ("pass_rate", None)]:
        key = f"batch/measure_nonzero/{measure}" if measure else "batch/pass_rate"
        values = [r[key] for r in rows if key in r]
        if not values:
            raise ValueError(f"no {key} in the run's metrics; expected one per version")
        out[f"{name}_first"] = round(float(np.mean(values[:window])), 4)
        out[f"{name}_last"] = round(float(np.mean(values[-window:])), 4)
    return out


def main(argv=None) -> list[dict]:
    """Run the warm start and both arms; print and return the JSON lines."""
    from experiments import rl as rl_exp

    p = argparse.ArgumentParser(prog="python -m benchmarks.learning.rl_ablation", description=__doc__.splitlines()[0])
    p.add_argument("--workdir", default="runs/bench_rl_ablation")
    p.add_argument("--versions", type=int, default=40, help="RL versions per arm")
    p.add_argument("--coef", type=float, default=0.25, help="lint_coef and todo_comment_coef of the `on` arm")
    p.add_argument("--teacher-lint", type=float, default=0.5, help="demonstrations with a lint finding")
    p.add_argument("--teacher-todo", type=float, default=0.5, help="demonstrations with a TODO comment")
    p.add_argument("--window", type=int, default=5, help="versions averaged at the start and the end")
    p.add_argument("--arms", default="on,off")
    p.add_argument("--reuse", action="store_true",
                   help="read an arm whose metrics already hold --versions versions instead of running it again")
    p.add_argument("--sft-from", default="", help="continue the toy's SFT warm start in this checkpoint folder")
    p.add_argument("--sft-steps", type=int, default=0, help="SFT steps (0: the toy config's)")
    p.add_argument("--transcripts", type=int, default=0, help="oracle transcripts (0: the toy config's)")
    args, overrides = p.parse_known_args(argv)
    sft = [f"--config.sft.init_from={args.sft_from}"] if args.sft_from else []
    sft += [f"--config.sft.steps={args.sft_steps}"] if args.sft_steps else []
    sft += [f"--config.sft.transcripts={args.transcripts}"] if args.transcripts else []
    root = Path(args.workdir)
    init = root / "sft" / "checkpoints"
    common = [f"--config.init_from={init}", f"--config.sft.teacher_lint={args.teacher_lint}",
              f"--config.sft.teacher_todo_comment={args.teacher_todo}", f"--config.rl.steps={args.versions}",
              f"--config.rl.eval_every={args.versions}",  # held-out evaluations at the start and the end
              "--config.reward.measure_all=True", *WHOLE_EPISODES, *sft, *overrides]
    lines = []
    for arm in args.arms.split(","):
        coef = {"on": args.coef, "off": 0.0}[arm]
        t0 = time.monotonic()
        metrics = root / arm / "logs" / "metrics.jsonl"
        done = read_metrics(metrics) if args.reuse and metrics.is_file() else []
        if sum("train_s" in m for m in done) >= args.versions:
            r = {"final_version": max(int(m.get("version", 0)) for m in done), "reused": True,
                 "evals": [m for m in done if "eval/pass_rate" in m]}
        else:
            r = rl_exp.main(["rl", f"--config.workdir={root / arm}", f"--config.reward.lint_coef={coef}",
                             f"--config.reward.todo_comment_coef={coef}", *common])
        rows = read_metrics(metrics)
        evals = r["evals"] or [{}]
        line = {"bench": "rl_ablation", "arm": arm, "coef": coef, "versions": r["final_version"],
                "seconds": round(time.monotonic() - t0), "reused": r.get("reused", False),
                "sft": {k: v for k, v in r.items() if k.startswith(("sft", "flaw"))},
                **window_means(rows, args.window),
                "heldout_pass_start": evals[0].get("eval/pass_rate"),
                "heldout_pass_end": evals[-1].get("eval/pass_rate")}
        print(json.dumps(line), flush=True)
        lines.append(line)
    arms = {line["arm"]: line for line in lines}
    if set(arms) == {"on", "off"}:
        on, off = arms["on"], arms["off"]
        verdict = {"bench": "rl_ablation", "compare": "on vs off",
                   **{f"{flaw}_last_on_minus_off": round(on[f"{flaw}_last"] - off[f"{flaw}_last"], 4)
                      for flaw in FLAWS},
                   "terms_reduce_flaws": all(on[f"{flaw}_last"] < off[f"{flaw}_last"] for flaw in FLAWS)}
        print(json.dumps(verdict), flush=True)
        lines.append(verdict)
    return lines


if __name__ == "__main__":
    main()
    sys.exit(0)
