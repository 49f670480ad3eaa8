"""The whole pipeline in one command: CPT bulk → CPT long → SFT → RL → evaluation → the suite v0 benchmark.

Run:      bash launch/pipeline.sh                        (a fresh machine: installs bubblewrap and the requirements)
          python -m experiments.pipeline                 (toy preset, CPU, the stdlib as corpus)
          python -m experiments.pipeline --preset gpu_small --workdir runs/gpu_small_pipeline
Hardware: toy — a 2-core CPU (README gives the measured wall time); RL, evaluation and the suite run the model's tool
          calls in bubblewrap sandboxes (root, `apt-get install bubblewrap`); on a host without them those stages
          print why and are skipped.
Expected: each stage starts from the previous stage's checkpoint and its recorded model config (YaRN, MTP depth,
vocabulary; train/loop.inherited_model); JSON lines per stage, then a table (also ROOT/summary.md): CPT loss falling
from ln(512) ≈ 6.24, bits per byte per training stage (comparable across tokenizers), the MTP heads' acceptance α
(CE + self-distillation), long-context CPT continuing, SFT loss on assistant tokens, RL (experiments/rl.py: oracle
warm start, a few async versions) pass rate and reward start → end with the reward terms and the fraction of episodes
that self-summarised, the held-out evaluation pass rate, and suite v0 against the final weights (pass@1 — near 0 for
a toy — and its errored trials, counted apart).
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from composer2_jax.env.runtime import host_problem
from composer2_jax.train.loop import train
from experiments import base, cpt_bulk, cpt_long, evaluate, rl, sft
from experiments.main import quiet_logs

# A stage is a config module trained by train/loop.py, or a function (preset, root, prev) -> (summary line, the
# checkpoint folder the next stage starts from) for stages that are not supervised training (RL, evaluation).
STAGES = (("cpt_bulk", cpt_bulk), ("cpt_long", cpt_long), ("sft", sft), ("rl", rl.run_stage),
          ("evaluate", rl.evaluate_stage), ("suite", evaluate.pipeline_stage))


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and its waited-for children (sandboxes, graders) so far: a
    figure that, unlike wall time, does not grow when other jobs share the cores."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv=None):
    ap = argparse.ArgumentParser(description="CPT bulk → long → SFT → RL → evaluation → suite on one machine")
    ap.add_argument("--preset", default="toy")
    ap.add_argument("--workdir", default="", help="default: runs/pipeline-<preset>-<time>")
    ap.add_argument("--stages", default=",".join(n for n, _ in STAGES), help="comma-separated subset, in order")
    args = ap.parse_args(argv)
    quiet_logs()
    base.ensure_tokenizer(base.base_stage(args.preset).tokenizer, args.preset)  # small: its BPE, trained once here
    root = Path(args.workdir or f"runs/pipeline-{args.preset}-{time.strftime('%Y%m%d-%H%M%S')}")
    prev, t0, cpu0, summary = "", time.time(), cpu_seconds(), []
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
            t, cpu = time.time(), cpu_seconds()
            line, prev = module(args.preset, str(root), prev)
            summary.append(dict(line, seconds=round(time.time() - t, 1), cpu_seconds=round(cpu_seconds() - cpu, 1)))
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
        t, cpu = time.time(), cpu_seconds()
        r = train(c)
        prev = str(root / name / "checkpoints")
        accept = [v for k, v in sorted(r.metrics.items()) if k.startswith("mtp/accept_")]
        line = dict(stage=name, steps=r.final_step, first_loss=round(r.losses[0], 4) if r.losses else None,
                    last_loss=round(r.losses[-1], 4) if r.losses else None,
                    first_bpb=round(r.bits_per_byte[0], 4) if r.bits_per_byte else None,
                    last_bpb=round(r.bits_per_byte[-1], 4) if r.bits_per_byte else None,
                    mtp_accept=[round(a, 3) for a in accept], yarn_factor=r.model.rope_scaling.factor
                    if r.model.rope_scaling else None, tokens_per_s=round(r.tokens_per_s),
                    seconds=round(time.time() - t, 1), cpu_seconds=round(cpu_seconds() - cpu, 1))
        summary.append(line)
        print(json.dumps(line), flush=True)
    total, cpu = round(time.time() - t0, 1), round(cpu_seconds() - cpu0, 1)
    table = markdown_table(summary, total, cpu)
    root.mkdir(parents=True, exist_ok=True)
    (root / "summary.md").write_text(table)
    (root / "summary.json").write_text(json.dumps(dict(stages=summary, seconds=total, cpu_seconds=cpu), indent=1))
    print(table)
    print(json.dumps(dict(pipeline=str(root), stages=len(summary), seconds=total, cpu_seconds=cpu)))
    return summary


def _arrow(a, b, fmt="{:.3f}") -> str:
    """'a → b' (or '–' when either is missing)."""
    return "–" if a is None or b is None else f"{fmt.format(a)} → {fmt.format(b)}"


def markdown_table(summary: list[dict], seconds: float, cpu: float | None = None) -> str:
    """One row per stage: loss, bits per byte (the main head's CE over the UTF-8 bytes of the learned tokens, comparable
    across tokenizers), MTP acceptance (per depth after training; RL: the rollouts' drafts, first → last
    version), RL pass and reward (start → end) with the reward terms, summary fraction, evaluation / suite pass
    rate, wall and CPU seconds."""
    head = ["stage", "loss: CE + λ·MTP (first → last)", "bits/byte (first → last)", "MTP acceptance α",
            "RL pass (start → end)", "reward (start → end)", "reward terms (last batch)", "summary fraction",
            "eval pass", "seconds", "CPU s"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in summary:
        if "skipped" in s:
            rows.append(f"| {s['stage']} | skipped: {s['skipped']} |" + " |" * (len(head) - 2))
            continue
        terms = ", ".join(f"{k} {v:+.3g}" for k, v in s.get("reward_terms", {}).items())
        evaluation = s.get("pass_rate", s.get("pass_at_1"))
        if s.get("pass_rate_start") is not None and evaluation is not None:  # the RL start → the final weights
            evaluation = f"{s['pass_rate_start']:.3f} → {evaluation:.3f}"
        if s["stage"] == "suite":
            evaluation = f"{'–' if evaluation is None else f'{evaluation:.3f}'} over {s['tasks']} tasks, " \
                         f"{s['errors']} errored"
        drafts = s.get("draft_acceptance")  # RL: the rollouts' acceptance per version that drafted
        accept = " / ".join(f"{a:.3f}" for a in s.get("mtp_accept", [])) or (
            f"drafts {_arrow(drafts[0], drafts[-1])}" if drafts else "–")
        cells = [s["stage"], _arrow(s.get("first_loss"), s.get("last_loss")),
                 _arrow(s.get("first_bpb"), s.get("last_bpb")), accept,
                 _arrow(s.get("pass_start"), s.get("pass_end")), _arrow(s.get("reward_start"), s.get("reward_end")),
                 terms or "–", "–" if "summary_fraction" not in s else f"{s['summary_fraction']:.2f}",
                 "–" if evaluation is None else (evaluation if isinstance(evaluation, str) else f"{evaluation:.3f}"),
                 f"{s.get('seconds', 0):.0f}", "–" if "cpu_seconds" not in s else f"{s['cpu_seconds']:.0f}"]
        rows.append("| " + " | ".join(cells) + " |")
    cpu_note = "" if cpu is None else f" ({cpu:.0f} CPU s: user + system, this process and its sandboxes)"
    return "\n".join(rows + ["", f"Whole pipeline: {seconds:.0f} s{cpu_note}.", ""])


if __name__ == "__main__":
    main()
