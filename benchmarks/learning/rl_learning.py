"""Learning evidence of the toy RL experiment (issue 9, item 5), one JSON line; exit status 1 when a target fails.

    python -m benchmarks.learning.rl_learning --workdir runs/bench_rl_learning [--config.KEY=VALUE ...]

Runs experiments/rl.py end to end — oracle transcripts through real sandboxes, the SFT warm start, asynchronous RL
(η = 2) through the real harness, tools and grading — with the held-out evaluation (pass@1 at T = 1) at the SFT
start and at the end, and checks the targets: held-out pass rate +≥ 20 points over the start; easy-task effort
< 0.9× the start's; hard-task pass rate ≥ start − 0.05; ≤ 30 minutes on 2 CPU cores (15 until the toy gained its
MTP depths, isolated verdicts and reward-term measurements: benchmarks/RESULTS.md, "Asynchronous RL on the
toy: learning evidence"). The line
also gives the generated tokens per useful sample over the run (records.useful_samples). `--family pkg` runs the
multi-module family (rl/pkg_tasks.py) with shapes that hold its whole episodes (`PKG`). `--preset small` runs the
small preset (2.8M parameters, its own BPE) on its own family, `pkg`, in its config's shapes (experiments/rl.py:
`small_pkg`), against the targets of that family: +≥ 15 points in ≤ 60 minutes. `--mode tree` runs tree
groups (rl/branching.py, `--node-choice`, `--token-budget`) with single-segment episodes. Measured figures:
docs/rl.md, "The toy experiment". Needs bubblewrap and setpriv (as the RL tests do).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from composer2_jax.rl.plots import read_metrics
from experiments.base import CPU_PRESETS

WHOLE_EPISODE_BUDGET = 352  # holds a whole toy episode (tree paths need single-segment episodes); ≤ prompt_len − 48
# The harness of every mode here: whole episodes, no self-summaries. The toy config's own budget (260) makes about
# half the episodes summarise, which its small SFT start does not learn well (docs/rl.md, "The toy experiment");
# these runs measure learning through the reward path, with the harness the targets were set on.
WHOLE_EPISODES = ["--config.harness.max_summaries=0", f"--config.harness.context_budget={WHOLE_EPISODE_BUDGET}"]
# --family pkg (rl/pkg_tasks.py): whole oracle episodes (k = 2 buggy modules, 6 turns; k = 3, 8 turns) are longer
# than every toy shape with this byte tokenizer (measured lengths: docs/rl.md, "A harder family: `pkg`"), so every
# shape that holds an episode grows: the context budget holds the longest whole episode, the rollout prompt that
# budget, a trainer row the budget + a reply, an SFT row one whole transcript (rows of 6 × 1,344 carry about the toy
# warm start's 8,192 tokens a step).
PKG_EPISODE_BUDGET = 1400
PKG = ["--config.tasks=pkg", "--config.harness.max_turns=10", "--config.harness.max_total_tokens=2048",
       f"--config.harness.context_budget={PKG_EPISODE_BUDGET}",
       f"--config.rollout.prompt_len={PKG_EPISODE_BUDGET + 56}", f"--config.trainer.seq_len={PKG_EPISODE_BUDGET + 264}",
       "--config.sft.seq_len=1344", "--config.sft.batch_size=6"]
FAMILIES = {"toy": [], "pkg": PKG}
TIME_BUDGET_S = 30 * 60  # the whole experiment on 2 CPU cores (RESULTS.md says why 30, not 15)
# The targets per family: (held-out pass@1 gain over the start, wall-clock budget of the whole run on 2 cores).
TARGETS = {"toy": (0.20, TIME_BUDGET_S), "pkg": (0.15, 60 * 60)}
# A tree group's generated tokens, per family: about a plain group's, so the two modes compare at equal tokens. toy:
# benchmarks/learning/tree_groups.py measures it; pkg: 13,239 generated tokens a version over 8 plain groups of 4 in
# the small preset's seed-0 run (docs/rl.md, "RL on `pkg`"), 1,655 a group.
TREE_TOKEN_BUDGETS = {"toy": 600, "pkg": 1650}


def main(argv=None) -> dict:
    """Run, print the JSON line, return it."""
    from experiments import rl as rl_exp

    p = argparse.ArgumentParser(prog="python -m benchmarks.learning.rl_learning", description=__doc__.splitlines()[0])
    p.add_argument("--workdir", default="runs/bench_rl_learning")
    p.add_argument("--mode", choices=("plain", "tree"), default="plain",
                   help="tree: rl.group_mode=tree (rl/branching.py) with single-segment episodes")
    p.add_argument("--node-choice", default="first_failure", help="tree mode: rl.tree.node_choice")
    p.add_argument("--token-budget", type=int, default=None,
                   help=f"tree mode: rl.tree.token_budget, the generated tokens of a group (default per family: "
                        f"{TREE_TOKEN_BUDGETS})")
    p.add_argument("--preset", choices=CPU_PRESETS, default="toy",
                   help="toy (178k parameters, bytes) or small (2.8M, its own BPE; its config is the pkg family's)")
    p.add_argument("--family", choices=tuple(FAMILIES), default=None,
                   help="the task family: toy (rl/tasks.py) or pkg (rl/pkg_tasks.py: 6–8-turn episodes, the shapes "
                        "that hold them); default: the preset's own (toy: toy, small: pkg)")
    p.add_argument("--sft-only", action="store_true",
                   help="only the SFT warm start and its held-out evaluation (no RL, no checks): one JSON line")
    p.add_argument("--probe", type=int, default=32,
                   help="held-out oracle transcripts for the copy probe (rl/copy_probe.py) of the start and the end "
                        "weights; 0: none")
    args, overrides = p.parse_known_args(argv)
    if args.preset == "toy":
        args.family = args.family or "toy"
        shapes = [*WHOLE_EPISODES, *FAMILIES[args.family]]  # later flags win: pkg's budget over 352
    else:  # small: its config holds pkg's whole episodes in BPE tokens already
        if args.family not in (None, "pkg"):
            p.error(f"--family={args.family} with --preset small; expected pkg (the shapes of its config)")
        args.family, shapes = "pkg", WHOLE_EPISODES[:1]
    spec = f"--config={rl_exp.__file__}:{args.preset}"  # before every --config.KEY (ml_collections' flag order)
    overrides = [*shapes, *overrides]
    if args.sft_only:
        t0 = time.monotonic()
        r = rl_exp.warm_start_main(["rl", spec, f"--config.workdir={args.workdir}/rl",
                                    f"--config.init_from={args.workdir}/rl/sft/checkpoints", *overrides],
                                   probe=args.probe)
        out = {"bench": "rl_learning", "preset": args.preset, "family": args.family, "sft_only": True,
               "seconds": round(time.monotonic() - t0), **r}
        print(json.dumps(out), flush=True)
        return out
    if args.mode == "tree":
        budget = TREE_TOKEN_BUDGETS[args.family] if args.token_budget is None else args.token_budget
        overrides = ["--config.rl.group_mode=tree", f"--config.rl.tree.node_choice={args.node_choice}",
                     f"--config.rl.tree.token_budget={budget}", *overrides]
    t0 = time.monotonic()
    r = rl_exp.main(["rl", spec, f"--config.workdir={args.workdir}/rl",
                     f"--config.init_from={args.workdir}/rl/sft/checkpoints", *overrides], probe=args.probe)
    seconds = time.monotonic() - t0
    rows = read_metrics(Path(args.workdir) / "rl" / "logs" / "metrics.jsonl")
    spent = sum(m.get("batch/tokens_spent", 0.0) for m in rows)
    useful = sum(m.get("batch/useful_samples", 0.0) for m in rows)
    first, last = r["evals"][0], r["evals"][-1]
    gain, budget = TARGETS[args.family]
    checks = {f"pass_rate_gain_ge_{gain:.2f}": last["eval/pass_rate"] >= first["eval/pass_rate"] + gain,
              "easy_effort_lt_0.9x": last["eval/effort/easy"] < 0.9 * first["eval/effort/easy"],
              "hard_pass_holds": last["eval/pass_rate/hard"] >= first["eval/pass_rate/hard"] - 0.05,
              f"under_{budget // 60}_minutes": seconds < budget}
    out = {"bench": "rl_learning", "preset": args.preset, "family": args.family, "mode": args.mode,
           "seconds": round(seconds),  # end to end: with the warm start where it was trained here
           "warm_start": {k: v for k, v in r.items() if k.startswith("sft") or k == "written"},
           "final_version": r["final_version"],
           "start": first, "end": last, "tokens_spent": spent, "useful_samples": useful,
           "tokens_per_useful_sample": round(spent / useful, 1) if useful else None,
           "copy_probe": r.get("copy_probe"), "checks": checks,
           "all_met": all(checks.values())}
    print(json.dumps(out), flush=True)
    return out


if __name__ == "__main__":
    sys.exit(0 if main().get("all_met", True) else 1)
