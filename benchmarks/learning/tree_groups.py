"""Plain vs tree groups at equal generated tokens on the toy family (issue 18, item 4), JSON lines + a plot.

    python -m benchmarks.learning.tree_groups --init runs/toy/rl/sft/checkpoints [--groups 8 --seeds 0,1,2 --plot
    FILE.png]
    python -m benchmarks.learning.tree_groups --policy scripted --p-correct 0.3   (oracle-like replies, no model:
    ~minutes)

The policy is fixed — the toy model's SFT warm start at `--init` (version 0 throughout), or `--policy scripted`:
rl/services/testing.py's oracle-like replies (read first on hard tasks, then the fix), each right with probability
`--p-correct` — so this measures what one batch of rollouts buys, not a learning curve. For each seed, the same
`--groups` training tasks are rolled out as plain groups (`--samples` episodes from the task's start) and as tree
groups (rl/branching.py: `--initial` episodes, then `--branches` continuations per chosen turn boundary) under each
node-choice rule, through the real embedded loop (rl/services/local.py: rollout worker, sandboxes, grader, staleness
gate) with a trainer that records the batch and does not update. Tree groups get the token budget the plain groups
of that seed actually spent per group (equal generated tokens). Every mode runs with `harness.max_summaries=0` and a
context budget that holds a whole toy episode (tree paths need single-segment episodes).

A useful sample carries a pass/fail learning signal (records.useful_samples: it trains a token whose success
advantage is non-zero). Per mode and seed: generated tokens, episodes, leaf pass rate, useful samples and tokens
per useful sample, samples/s; then one summary line per mode (mean and spread over seeds, and the ratio of tokens
per useful sample to the plain groups': the issue's goal is ≤ 0.6).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np

from composer2_jax.data import tokenizer as tk
from composer2_jax.env import Environment
from composer2_jax.rl import orchestrator, tasks
from composer2_jax.rl.branching import TreeConfig
from composer2_jax.rl.curriculum import TaskCurriculum
from composer2_jax.rl.records import Counters, GroupRecord, summarize_groups, useful_samples
from composer2_jax.rl.run_config import LoopConfig
from composer2_jax.rl.services.env_worker import env_worker_for, sandbox_limits
from composer2_jax.rl.services.local import LocalOrchestrator
from composer2_jax.rl.services.rollout import RolloutWorker
from composer2_jax.rl.services.weights import Weights, WeightStore
from composer2_jax.train.loop import inherited_model, load_stage_params


class FrozenTrainer:
    """The trainer's face to the loop with fixed weights: `train` records the batch and bumps the version."""

    def __init__(self, params, router_state, model_cfg, num_moe: int):
        self.params, self.router_state, self.model_cfg, self.num_moe = params, router_state, model_cfg, num_moe
        self.version = 0
        self.batches: list[list[GroupRecord]] = []

    def weights(self) -> Weights:
        return Weights(self.version, self.params, self.router_state)

    def train(self, groups: list[GroupRecord]) -> dict:
        self.batches.append(groups)
        self.version += 1
        lags = [self.version - 1 - g.min_version for g in groups]
        return {"staleness_max": float(max(lags)), **{f"batch/{k}": v for k, v in summarize_groups(groups).items()}}


def run_config(args):
    """The toy RL config of every mode: single-segment episodes (max_summaries=0, context budget 352)."""
    from experiments import rl as rl_exp

    c = rl_exp.get_config("toy")
    c.init_from, c.workdir = args.init, args.workdir
    c.harness.update(context_budget=args.context_budget, max_summaries=0)
    c.rl.update(eta=0, steps=1, groups_per_batch=args.groups, samples=args.samples, eval_every=0, plot=False)
    return orchestrator.rl_config(c)


def one_mode(run, env, tok, model, params, router, num_moe, mode: str, rule: str, seed: int, budget: int,
             args) -> dict:
    """Roll out the seed's tasks once in one mode; its JSON line."""
    tree = mode == "tree"
    rl = dataclasses.replace(
        run.rl, group_mode=mode, task_seed=seed,
        tree=TreeConfig(initial=args.initial, branches=args.branches, token_budget=max(1, budget),
                        node_choice=rule or "uniform"),
        loop=LoopConfig(episode_threads=args.threads, max_retries=1, take_timeout_s=1200))
    task_list = tasks.task_set(args.groups, seed, tuple(run.rl.levels), "train")
    store, counters = WeightStore(), Counters()
    trainer = FrozenTrainer(params, router, model, num_moe)
    if args.policy == "scripted":  # oracle-like replies, each right with probability --p-correct (no model)
        from composer2_jax.rl.services.testing import ScriptedRollout

        rollout = ScriptedRollout(store, p_correct=args.p_correct, seed=1000 * seed + len(rule))
    else:
        rollout = RolloutWorker(model, store, run.rollout, tok.special_id(tk.IM_END), counters,
                                vocab_limit=orchestrator.vocab_limit(tok, model.vocab_size))
    worker = env_worker_for(run, env, tok)
    t0 = time.monotonic()
    try:
        LocalOrchestrator(trainer, rollout, worker, TaskCurriculum(task_list, seed), rl, store, counters).run()
    finally:
        worker.close()
    wall = time.monotonic() - t0
    groups = trainer.batches[0]
    eps = [e for g in groups for e in g.episodes]
    spent, useful = sum(e.generated_tokens for e in eps), sum(useful_samples(g) for g in groups)
    return {"bench": "rl_tree", "mode": mode if not tree else f"tree/{rule}", "seed": seed, "groups": len(groups),
            "episodes": len(eps), "token_budget": budget if tree else None,
            "pass_rate": round(float(np.mean([e.success for e in eps])), 4), "tokens_spent": spent,
            "tokens_per_group": round(spent / len(groups), 1), "useful_samples": useful,
            "useful_fraction": round(useful / len(eps), 4),
            "tokens_per_useful_sample": round(spent / useful, 1) if useful else None,
            "branches": counters.get("tree_branches"), "groups_dropped": counters.get("groups_dropped"),
            "wall_s": round(wall, 1), "samples_per_s": round(len(eps) / wall, 3)}


def summarize(rows: list[dict]) -> list[dict]:
    """One line per mode: means and spreads over seeds; tokens per useful sample (pooled: all tokens / all useful
    samples of the mode) and its ratio to the plain groups'."""
    out = []
    for mode in dict.fromkeys(r["mode"] for r in rows):
        rs = [r for r in rows if r["mode"] == mode]
        useful = sum(r["useful_samples"] for r in rs)
        out.append({"bench": "rl_tree", "summary": mode, "seeds": len(rs),
                    "pass_rate": round(float(np.mean([r["pass_rate"] for r in rs])), 4),
                    "pass_rate_std": round(float(np.std([r["pass_rate"] for r in rs])), 4),
                    "tokens_per_group": round(float(np.mean([r["tokens_per_group"] for r in rs])), 1),
                    "useful_fraction": round(float(np.mean([r["useful_fraction"] for r in rs])), 4),
                    "useful_per_group": round(useful / sum(r["groups"] for r in rs), 3),
                    "tokens_per_useful_sample": round(sum(r["tokens_spent"] for r in rs) / useful, 1) if useful
                    else None,
                    "samples_per_s": round(float(np.mean([r["samples_per_s"] for r in rs])), 3)})
    plain = next((s["tokens_per_useful_sample"] for s in out if s["summary"] == "plain"), None)
    for s in out:
        t = s["tokens_per_useful_sample"]
        s["tokens_per_useful_vs_plain"] = round(t / plain, 3) if t and plain else None
    return out


def plot(rows: list[dict], summary: list[dict], path: str, policy: str) -> None:
    """Tokens per useful sample and pass rate per mode (bars: pooled over seeds; dots: each seed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = [s["summary"] for s in summary]
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    for ax, key, title in zip(axes, ("tokens_per_useful_sample", "useful_fraction", "pass_rate"),
                              ("generated tokens per useful sample", "useful fraction of samples",
                               "leaf pass rate")):
        ax.bar(range(len(modes)), [s[key] or 0 for s in summary], color="#9ecae1")
        for i, m in enumerate(modes):
            ys = [r[key] for r in rows if r["mode"] == m and r[key] is not None]
            ax.plot([i] * len(ys), ys, "k.", markersize=6)
        ax.set_xticks(range(len(modes)), modes, fontsize=8)
        ax.set_title(title)
    fig.suptitle(f"plain vs tree groups at equal generated tokens (toy, fixed {policy} policy)")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.learning.tree_groups", description=__doc__.splitlines()[0])
    p.add_argument("--init", default="", help="the SFT checkpoint folder (the fixed policy; --policy model)")
    p.add_argument("--policy", choices=("model", "scripted"), default="model",
                   help="scripted: oracle-like replies right with probability --p-correct (no model, no JAX)")
    p.add_argument("--p-correct", type=float, default=0.3, help="--policy scripted: P(a reply is right)")
    p.add_argument("--workdir", default="runs/bench_rl_tree")
    p.add_argument("--groups", type=int, default=8, help="tasks (groups) per mode and seed")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--rules", default="uniform,first_failure,entropy", help="node-choice rules of the tree modes")
    p.add_argument("--samples", type=int, default=4, help="plain groups: episodes per task")
    p.add_argument("--initial", type=int, default=2, help="tree groups: episodes from the task's start")
    p.add_argument("--branches", type=int, default=2, help="tree groups: continuations per chosen boundary")
    p.add_argument("--context-budget", type=int, default=352, help="holds a whole toy episode (no summaries)")
    p.add_argument("--threads", type=int, default=16, help="episode threads")
    p.add_argument("--out", default="", help="also write the JSON lines here")
    p.add_argument("--plot", default="", help="write the plot here")
    args = p.parse_args(argv)
    run = run_config(args)
    if args.policy == "scripted":
        from composer2_jax.rl.services.testing import CountingTrainer

        model, params, router, num_moe = CountingTrainer(0).model_cfg, {}, {}, 0
        run = dataclasses.replace(run, tokenizer=dataclasses.replace(run.tokenizer, name="byte", path=""))
    else:
        model = inherited_model(run.preset, run.model, run.init_from)
        run = dataclasses.replace(run, model=model)
    tok = run.tokenizer.build()
    if args.policy == "model":
        if not args.init:
            p.error("--policy model needs --init (the SFT checkpoint folder)")
        trainer = orchestrator.make_trainer(run, tok)
        params, router = load_stage_params(run.init_from, trainer.abstract)
        num_moe = trainer.num_moe
        del trainer
    rows = []
    out = open(args.out, "w") if args.out else None

    def emit(row: dict) -> None:
        print(json.dumps(row), flush=True)
        if out is not None:
            out.write(json.dumps(row) + "\n")
            out.flush()

    with Environment(pool_size=run.env.pool_size, limits=sandbox_limits(run.env)) as env:
        for seed in (int(s) for s in args.seeds.split(",")):
            plain = one_mode(run, env, tok, model, params, router, num_moe, "plain", "", seed, 0, args)
            rows.append(plain)
            emit(plain)
            budget = round(plain["tokens_per_group"])  # equal generated tokens per group
            for rule in args.rules.split(","):
                row = one_mode(run, env, tok, model, params, router, num_moe, "tree", rule, seed, budget, args)
                rows.append(row)
                emit(row)
    summary = summarize(rows)
    for s in summary:
        emit(s)
    if args.plot:
        plot(rows, summary, args.plot, "SFT" if args.policy == "model" else f"scripted p={args.p_correct}")
    if out is not None:
        out.close()
    return rows + summary


if __name__ == "__main__":
    main()
