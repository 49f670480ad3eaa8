"""The whole pipeline in one command: CPT bulk → CPT long → SFT → RL → evaluation.

Run:      python -m experiments.pipeline                 (toy preset, CPU, the stdlib as corpus)
          python -m experiments.pipeline --preset gpu_small --workdir runs/gpu_small_pipeline
Hardware: toy — a 2-core CPU, 274 s in all (2026-11-30); RL and evaluation run the model's tool calls in bubblewrap
          sandboxes (root, `apt-get install bubblewrap`); on a host without them those two stages print why and are
          skipped.
Expected: each stage starts from the previous stage's checkpoint; printed JSON lines show the CPT loss falling
from ln(512) ≈ 6.24 to below 3.5, long-context CPT continuing from there, SFT loss on assistant tokens < 1.5, the
RL stage (experiments/rl.py: oracle-transcript warm start from the SFT weights, then a few async versions) and the
held-out evaluation of its final weights (pass rate and effort per difficulty).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from composer2_jax.env.runtime import host_problem
from composer2_jax.train.loop import train
from experiments import cpt_bulk, cpt_long, rl, sft
from experiments.main import quiet_logs

# A stage is a config module trained by train/loop.py, or a function (preset, root, prev) -> (summary line, the
# checkpoint folder the next stage starts from) for stages that are not supervised training (RL, evaluation).
STAGES = (("cpt_bulk", cpt_bulk), ("cpt_long", cpt_long), ("sft", sft), ("rl", rl.run_stage),
          ("evaluate", rl.evaluate_stage))


def main(argv=None):
    ap = argparse.ArgumentParser(description="CPT bulk → long → SFT → RL → evaluation on one machine")
    ap.add_argument("--preset", default="toy")
    ap.add_argument("--workdir", default="", help="default: runs/pipeline-<preset>-<time>")
    ap.add_argument("--stages", default=",".join(n for n, _ in STAGES), help="comma-separated subset, in order")
    args = ap.parse_args(argv)
    quiet_logs()
    root = Path(args.workdir or f"runs/pipeline-{args.preset}-{time.strftime('%Y%m%d-%H%M%S')}")
    prev, t0, summary = "", time.time(), []
    sandbox_problem = host_problem()
    for name, module in STAGES:
        if name not in args.stages.split(","):
            continue
        if callable(module) and sandbox_problem:  # RL and evaluation run the model's tool calls in sandboxes
            summary.append(dict(stage=name, skipped=f"no sandboxes on this host ({sandbox_problem}); install "
                                                    f"bubblewrap (apt-get install bubblewrap, docs/env.md) to run it"))
            print(json.dumps(summary[-1]), flush=True)
            continue
        if callable(module):
            t = time.time()
            line, prev = module(args.preset, str(root), prev)
            summary.append(dict(line, seconds=round(time.time() - t, 1)))
            print(json.dumps(summary[-1]), flush=True)
            continue
        c = module.get_config(args.preset)
        c.workdir = str(root / name)
        c.init_from = prev
        if hasattr(module, "prepare"):
            for src in c.data.sources:
                if src["kind"] == "chat_jsonl":
                    src["path"] = str(root / "sft_data" / "stdlib_chats.jsonl")
            module.prepare(c)
        t = time.time()
        r = train(c)
        prev = str(root / name / "checkpoints")
        line = dict(stage=name, steps=r.final_step, first_loss=round(r.losses[0], 4) if r.losses else None,
                    last_loss=round(r.losses[-1], 4) if r.losses else None, tokens_per_s=round(r.tokens_per_s),
                    seconds=round(time.time() - t, 1))
        summary.append(line)
        print(json.dumps(line), flush=True)
    print(json.dumps(dict(pipeline=str(root), stages=len(summary), seconds=round(time.time() - t0, 1))))
    return summary


if __name__ == "__main__":
    main()
