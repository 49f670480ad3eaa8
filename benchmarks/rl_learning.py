"""Learning evidence of the toy RL experiment (issue 9, item 5), one JSON line; exit status 1 when a target fails.

    python -m benchmarks.rl_learning --workdir runs/bench_rl_learning [--config.KEY=VALUE ...]

Runs experiments/rl.py end to end — oracle transcripts through real sandboxes, the SFT warm start, asynchronous RL
(η = 2) through the real harness, tools and grading — with the held-out evaluation (pass@1 at T = 1) at the SFT
start and at the end, and checks the targets: held-out pass rate +≥ 20 points over the start; easy-task effort
< 0.9× the start's; hard-task pass rate ≥ start − 0.05; ≤ 15 minutes on 2 CPU cores. Measured 2026-11-30 on a
2-core machine: all met — 0.148 → 0.453, easy effort 0.83×, hard 0.047 → 0.156, 756 s (three runs in docs/rl.md,
"The toy experiment", and benchmarks/RESULTS.md). Needs bubblewrap and setpriv (as the RL tests do).
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main(argv=None) -> dict:
    """Run, print the JSON line, return it."""
    from experiments import rl as rl_exp

    p = argparse.ArgumentParser(prog="python -m benchmarks.rl_learning", description=__doc__.splitlines()[0])
    p.add_argument("--workdir", default="runs/bench_rl_learning")
    args, overrides = p.parse_known_args(argv)
    t0 = time.monotonic()
    r = rl_exp.main(["rl", f"--config.workdir={args.workdir}/rl",
                     f"--config.init_from={args.workdir}/rl/sft/checkpoints", *overrides])
    seconds = time.monotonic() - t0
    first, last = r["evals"][0], r["evals"][-1]
    checks = {"pass_rate_gain_ge_0.20": last["eval/pass_rate"] >= first["eval/pass_rate"] + 0.20,
              "easy_effort_lt_0.9x": last["eval/effort/easy"] < 0.9 * first["eval/effort/easy"],
              "hard_pass_holds": last["eval/pass_rate/hard"] >= first["eval/pass_rate/hard"] - 0.05,
              "under_15_minutes": seconds < 15 * 60}
    out = {"bench": "rl_learning", "seconds": round(seconds), "final_version": r["final_version"], "start": first,
           "end": last, "checks": checks, "all_met": all(checks.values())}
    print(json.dumps(out), flush=True)
    return out


if __name__ == "__main__":
    sys.exit(0 if main()["all_met"] else 1)
