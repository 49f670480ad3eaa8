"""Evaluation — run an agent on a benchmark suite through the same tool-call harness as RL rollouts.

Run:      python -m experiments.evaluate --suite v0 --agent oracle              (reference solutions)
          python -m experiments.evaluate --suite v1 --agent oracle              (suite v1; per category below)
          python -m experiments.evaluate --suite v0 --agent null                (submits at once)
          python -m experiments.evaluate --suite v0 --agent model:runs/toy/rl/checkpoints --samples 4 --k 1,4
Hardware: scripted agents — any Linux host with bubblewrap, run as root (the sandboxes mount overlays); tasks with
          an environment/Dockerfile also need podman and debootstrap (images are built once and cached);
          2 cores: the v0 oracle run takes about a minute with --workers 4.
Exit:     0 when every trial ran; 1 when a trial crashed or no task ran (an unsupported --tasks name says why);
          2 on bad arguments.
Expected: oracle 100 % pass@1 on every category, null 0 %; results under runs/eval/<suite>/<agent>/<stamp>/
          (results.json, report.md, pass_at_k.png, logs/) and runs/eval/index.json keyed by suite version.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import logging
import sys
import time
from pathlib import Path

from composer2_jax.bench import policies, report
from composer2_jax.bench.runner import TrialOptions, run_suite
from composer2_jax.bench.task import load_suite
from composer2_jax.data import tokenizer as tk
from composer2_jax.env import EgressPolicy, Environment, SandboxConfig, SandboxLimits
from composer2_jax.env.harness import HarnessConfig


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Command-line flags."""
    p = argparse.ArgumentParser(prog="python -m experiments.evaluate", description=__doc__.splitlines()[0])
    p.add_argument("--suite", default="v0", help="suite version under benchmarks/tasks/, or a folder of tasks")
    p.add_argument("--agent", default="oracle", help="oracle | null | broken | tamper | model:CHECKPOINT")
    p.add_argument("--tasks", default="", help="comma-separated task names (default: the whole suite)")
    p.add_argument("--samples", type=int, default=1, help="episodes per task (n of pass@k)")
    p.add_argument("--k", default="1", help="comma-separated k values of pass@k (each <= --samples)")
    p.add_argument("--workers", type=int, default=4, help="episodes run in parallel")
    p.add_argument("--max-turns", type=int, default=50, help="model replies per episode")
    p.add_argument("--max-new-tokens", type=int, default=4096, help="tokens per reply")
    p.add_argument("--max-total-tokens", type=int, default=200_000, help="generated tokens per episode")
    p.add_argument("--context-budget", type=int, default=32_768, help="self-summarise past this context length")
    p.add_argument("--summary-tokens", type=int, default=2048, help="most tokens a self-summary may take (kept free "
                   "in a model's context, so a model agent's budget is its context minus this)")
    p.add_argument("--tokenizer", default="", help="byte | kimi/tiktoken | hf | bpe | auto (with --tokenizer-path); "
                   "default: the checkpoint's for model agents, byte otherwise")
    p.add_argument("--tokenizer-path", default="", help="tokenizer file or directory (tiktoken.model, tokenizer.json)")
    p.add_argument("--out", default="runs/eval", help="output root")
    p.add_argument("--agent-allow-hosts", default="", help="comma-separated host patterns: what agents of tasks with "
                   "allow_internet = true (and no [environment.egress]) may reach; default any host. The verifier "
                   "phase always reaches the package registries (docs/benchmark.md)")
    p.add_argument("--no-plot", action="store_true", help="skip the matplotlib plot")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    """Run the suite, write the record, print the overall line; exit 1 if any trial crashed."""
    return run(argv)[0]


def run(argv: list[str]) -> tuple[int, dict | None, dict]:
    """(exit status, the run's record or None, its file paths) of `main(argv)`."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    ks = sorted({int(k) for k in args.k.split(",") if k})
    if not ks or max(ks) > args.samples:
        raise SystemExit(f"--k {args.k}: expected k values in 1..--samples={args.samples}")
    names = [t for t in args.tasks.split(",") if t]
    try:
        suite = load_suite(args.suite).select(names)
    except KeyError as e:
        print(f"evaluate: {e.args[0]}", file=sys.stderr)
        return 2, None, {}
    for u in suite.unsupported if names else ():
        print(f"evaluate: task {u.name} is unsupported: {u.reason}", file=sys.stderr)
    if not suite.tasks:
        print(f"evaluate: no task of suite {suite.name} can run ({len(suite.unsupported)} unsupported)",
              file=sys.stderr)
        return 1, None, {}
    tokenizer = tk.make_tokenizer(args.tokenizer, args.tokenizer_path or None) if args.tokenizer else None
    config = HarnessConfig(max_turns=args.max_turns, max_new_tokens=args.max_new_tokens,
                           max_total_tokens=args.max_total_tokens, context_budget=args.context_budget,
                           summary_tokens=args.summary_tokens)
    agent = policies.make_agent(args.agent, config, tokenizer)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = Path(args.out) / suite.name / policies.describe(args.agent) / stamp
    start = time.monotonic()
    longest = max([600.0] + [t for task in suite.tasks for t in (task.config.agent_timeout_s or 0,
                                                                  task.config.verifier_timeout_s)])
    cores = max([1.0] + [t.config.cpus for t in suite.tasks if t.is_image])
    limits = SandboxLimits(timeout_s=120, max_timeout_s=longest,  # a task's own timeouts are never capped
                           sandbox_cpu_s=max(3600.0, 2 * longest * cores))
    pool = min(args.workers, 8) if any(not t.is_image for t in suite.tasks) else 0
    with Environment(pool_size=pool, limits=limits, config=SandboxConfig(image_pool_size=min(args.workers, 4))) as env:
        allow = EgressPolicy(allow_hosts=tuple(h.strip() for h in args.agent_allow_hosts.split(",") if h.strip()))
        trials = run_suite(env, suite, agent, samples=args.samples, workers=args.workers,
                           options=TrialOptions(log_dir=run_dir / "logs",
                                                agent_egress=allow if args.agent_allow_hosts else None))
    record = report.build_record(suite, args.agent, [t.to_dict() for t in trials], ks,
                                 meta={"argv": argv, "wall_s": round(time.monotonic() - start, 1),
                                       "harness": dataclasses.asdict(agent.config)})
    paths = report.write_run(args.out, run_dir, record, with_plot=not args.no_plot)
    overall = record["overall"]
    print(f"{args.agent} on {suite.name}: " + ", ".join(f"{k} {report.pct(v)}%" for k, v in overall.items()
                                                        if k.startswith("pass@"))
          + f" over {overall['tasks']} tasks ({len(suite.unsupported)} unsupported, {overall['errors']} trials "
            f"errored); report: {paths['markdown']}")
    for name, row in record["categories"].items():
        print(f"  {name}: " + ", ".join(f"{k} {report.pct(v)}%" for k, v in row.items() if k.startswith("pass@"))
              + f" over {row['tasks']} tasks")
    return int(not trials or any(t.error for t in trials)), record, paths


# The suite as the last stage of experiments/pipeline.py: one short reply per task from the pipeline's final weights
# (a toy model fails them; the run must complete, and report any crash as an error). 8 workers: the episodes' ~4.8k-
# token prompts batch into a few engine calls (each new padded shape compiles; measured figures: README,
# "Quickstart").
# One short reply per task, and summaries of at most 64 tokens: a model agent's context budget is its context less
# the summary's room (bench/policies.py fit_context), and the default 2,048 would leave the toy's 8,192-token context
# too small for suite v0's byte-level prompts (5,644–6,101 tokens).
PIPELINE_ARGS = ("--suite", "v0", "--samples", "1", "--workers", "8", "--max-turns", "1", "--max-new-tokens", "16",
                 "--summary-tokens", "64", "--no-plot")


def pipeline_stage(preset: str, root: str, prev: str) -> tuple[dict, str]:
    """experiments/pipeline.py stage 'suite': suite v0 against the final checkpoint; (summary line, prev)."""
    code, record, paths = run([*PIPELINE_ARGS, "--agent", f"model:{prev}", "--out", f"{root}/suite"])
    if record is None:
        raise RuntimeError(f"the suite did not run (exit {code}); see the messages above")
    overall = record["overall"]
    return dict(stage="suite", tasks=overall["tasks"], pass_at_1=overall.get("pass@1"),
                errors=overall["errors"], report=str(paths["markdown"])), prev


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
