"""Stage 4 — asynchronous RL on generated verifiable coding tasks, through the real sandboxes and tool calls.

Run:      python -m experiments.rl                                  (toy: transcripts → SFT warm start → async RL)
          python -m experiments.rl --config.rl.eta=0                (the synchronous loop)
          python -m experiments.rl --config.rl.backend=ray          (the same services as Ray actors)
          python -m experiments.rl --config.tasks=toy@2,suite:v0@1  (a curriculum of task sources, docs/rl.md)
          python -m experiments.rl --config=experiments/rl.py:small (2.8M parameters, its own BPE, the pkg family:
                    about 75 minutes of warm start on 2 cores; docs/rl.md, "A harder family")
          python -m experiments.rl --config=experiments/rl.py:kimi_k2_5 --dry_run --dry_run_depth=extrapolate
                    (compile the planned config on its simulated chips, one JSON line: experiments/dry_run.py)
Hardware: toy — a 2-core CPU with bubblewrap (run as root); measured stage times: docs/rl.md, "The toy experiment".
Expected: the issue's targets (benchmarks/learning/rl_learning.py, whole episodes): held-out pass@1 at T = 1 + ≥ 20
points
          over the SFT start (an imperfect teacher: sft.teacher_error = 0.5), easy effort < 0.9× the start's, hard
          pass ≥ start − 0.05, ≤ 30 minutes on 2 cores; measured figures: docs/rl.md, "The toy experiment".
          Curves: runs/toy/rl/curves.png; per-version metrics: runs/toy/rl/logs/metrics.jsonl
          (batch/summary_fraction and batch/summary_tokens: the self-summaries; rollout/acceptance: the MTP drafts).
          With this config's summarising budget (260) the start is weaker and learns more slowly
          (docs/rl.md, "The toy experiment").
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from pathlib import Path

from absl import flags

from composer2_jax import schema
from composer2_jax.data.chat import end_token_id
from composer2_jax.env import Environment
from composer2_jax.env.harness import HarnessConfig
from composer2_jax.losses.rl import PolicyLossConfig
from composer2_jax.rl import copy_probe, orchestrator, sources
from composer2_jax.rl.rewards import TERMS, RewardConfig
from composer2_jax.rl.run_config import EnvConfig, RLConfig, RLExperimentConfig, WarmStartConfig
from composer2_jax.rl.services.env_worker import env_worker_for, sandbox_limits
from composer2_jax.rl.services.oracle import read_transcripts, write_oracle_transcripts, write_solution_transcripts
from composer2_jax.rl.services.rollout import RolloutConfig
from composer2_jax.rl.services.trainer import TrainerConfig
from composer2_jax.train import init_from
from composer2_jax.train.checkpoint import CheckpointConfig, Checkpointer
from experiments import base, dry_run, plans, sft


def get_config(preset: str = "toy"):
    """RL config: the preset's model and optimizer, plus the RL services' sections (rl/run_config.py)."""
    cpu = preset in base.CPU_PRESETS  # toy and small: CPU sizes (small: its own family and shapes, below)
    stage = base.base_stage(preset)
    # Adam moves every weight by ~lr per update whatever the gradient's size: on the toy, 3e-4 degrades the policy
    # within 16 versions, 1e-4 (one update per version) learns (docs/rl.md, "The toy experiment").
    optim = dataclasses.replace(stage.optim, lr=1e-4 if cpu else 1e-6, schedule="constant", warmup_steps=4,
                                weight_decay=0.0, clip_norm=1.0)
    c = schema.to_config_dict(RLExperimentConfig(
        preset=preset, model=stage.model, tokenizer=stage.tokenizer, optim=optim, workdir=f"runs/{preset}/rl",
        init_from=f"runs/{preset}/rl/sft/checkpoints",  # version 0 = these weights (the SFT warm start)
        checkpoint=CheckpointConfig(every=10, async_save=False),
        rl=RLConfig(steps=100 if cpu else 1000, groups_per_batch=8 if cpu else 256, samples=4 if cpu else 16),
        # Fixed engine shapes. Drafts: the MTP depths (D = model.num_mtp_layers; set 0 with a model that has none)
        # draft D tokens per decode step and the trunk verifies them in the same pass — the seed's inference path.
        rollout=RolloutConfig(batch_size=16, prompt_len=400, max_new_tokens=192, num_draft=stage.model.num_mtp_layers),
        # toy: 32 rows hold a whole version's 32 episodes, so each version is one update over every group (a
        # group's Dr. GRPO baseline cancels inside the update instead of across PPO minibatches).
        trainer=TrainerConfig(rows=32 if cpu else 16, seq_len=640),
        # Decoupled PPO, Dr. GRPO normaliser, clip-higher; negative_scale = λ of the asymmetric estimator (Â ← λ·Â
        # where Â < 0: the toy's failures otherwise push down the tool-call format they share with successes).
        # mtp_distill_weight: the drafting heads are re-distilled on the rollout tokens (KL to the detached main
        # head): RL moves the trunk away from the distribution the heads learnt in CPT/SFT, and the drafts'
        # acceptance falls as it moves. The term's gradient reaches only the MTP depths (trunk, embedding and head
        # detached), so its weight trades nothing against the policy gradient; 1 = the CPT stages' full
        # distillation weight. docs/rl.md measures acceptance per version with it on and off.
        loss=PolicyLossConfig(clip_eps_low=0.2, clip_eps_high=0.28, aggregation="constant", behav_weight="full",
                              negative_scale=0.3 if cpu else 1.0, mtp_distill_weight=1.0),
        reward=RewardConfig(penalty_coef=1e-3, penalty_k=1e-3, penalty_q=1.0, penalty_on="success"),
        # toy: the oracle needs ≤ 2 turns (read, fix); a 2-turn cap ends failed episodes early (cheaper versions).
        # Context budget 260: above the context before the fix on easy tasks read first, below it on hard ones
        # (measured figures: docs/rl.md, "Self-summaries"), so about half the episodes — every hard one — summarise
        # (the oracle's summary names the line to fix, rl/tasks.oracle_summary) and train on two segments.
        harness=HarnessConfig(max_turns=2 if cpu else 4, max_new_tokens=192, max_total_tokens=1024,
                              context_budget=260 if cpu else 352, summary_tokens=64, max_observation_chars=512,
                              system_prompt="Fix the bug.", summary_prompt="Summarize your progress."),
        env=EnvConfig(tools=("read_file", "edit_file", "submit"), pool_size=16),
        # experiments/sft.py on the oracle's transcripts; the toy warm start is short and its teacher imperfect
        # (lr 3e-3, 165 steps; the start's held-out pass with and without teacher error: docs/rl.md, "The SFT
        # start"; the hard-task ceiling is ~1/3). Toy rows of 16 × 512 carry the positions of 8 × 1,024 at a lower
        # cost per step (attention is quadratic in the row; measured figures: benchmarks/RESULTS.md, "Asynchronous
        # RL on the toy: learning evidence").
        sft=WarmStartConfig(transcripts=600 if cpu else 1500, teacher_error=0.5 if cpu else 0.0,
                            steps=165 if cpu else 2000, lr=3e-3 if cpu else 2e-5,
                            seq_len=512 if cpu else 1024, batch_size=16 if cpu else 8),
    ))
    if preset == "small":
        small_pkg(c)
    # real presets: the planned trainer mesh, rows × seq_len, kernels, remat and expert capacity (experiments/plans.py)
    return plans.apply_rl(c, preset)


SMALL_PKG_BUDGET = 1024  # BPE tokens: the longest oracle episode of `pkg` is 642 (762 with the retesting teacher)


def small_pkg(c) -> None:
    """The `small` preset's RL: the multi-turn `pkg` family (rl/pkg_tasks.py) in shapes that hold its whole episodes in
    BPE tokens, from the warm start measured to pass ≥ 30 % of its held-out split (docs/rl.md, "A harder family")."""
    c.tasks = "pkg"
    c.harness.update(max_turns=10, max_total_tokens=2048, context_budget=SMALL_PKG_BUDGET)
    c.rollout.prompt_len = SMALL_PKG_BUDGET + 56  # the budget + a summary request (orchestrator.check_shapes)
    c.trainer.seq_len = SMALL_PKG_BUDGET + 264  # ... + a reply
    c.sft.update(transcripts=600, teacher_error=0.25, seq_len=704, batch_size=12, steps=SMALL_SFT_STEPS)
    # The toy's penalty charges a success ln(1 + k·x) at λ = k: ≈ 0.26 at a toy episode's ≈ 300 effort units, but ≈ 0.69
    # at a pkg episode's ≈ 1,000, a third of the success signal left (docs/rl.md). λ and k scaled by 300 / 1,000
    # charge a pkg success the toy's 0.26 and keep the penalty's slope per unit of effort proportional.
    c.reward.update(penalty_coef=PKG_PENALTY, penalty_k=PKG_PENALTY)


# The warm start that first passed ≥ 30 % of pkg's held-out split: 1,000 steps of the plain teacher, 12 rows, the MTP
# depths throughout (run f, 0.383, about 75 minutes on 2 cores with ragged expert matmuls). Cheaper ones were not
# reliable (docs/rl.md, "A warm start in about 22 minutes"): the trunk alone on 6 rows (sft.mtp_steps) passed 0.344 in
# one run and 0.023 in the next; 800 steps 0.086. The retesting teacher at 300 steps passed 1 of 128 (run g).
SMALL_SFT_STEPS = 1000
PKG_PENALTY = 3e-4  # λ = k for pkg's ≈ 1,000-unit episodes (the toy's 1e-3 × 300 / 1,000)


def sft_config(run: RLExperimentConfig, *, steps: int | None = None, lr: float | None = None):
    """The SFT warm start as an experiments/sft.py config on the oracle transcripts (the RL run's model); `steps` and
    `lr` default to the run's `sft` section."""
    w = run.sft
    steps, lr = steps or w.steps, lr or w.lr
    c = sft.get_config(run.preset)
    c.model = schema.to_config_dict(run.model)
    c.tokenizer = schema.to_config_dict(run.tokenizer)  # the run's own: its rollouts and evaluation read these ids
    c.workdir = str(Path(run.init_from).parent)
    c.init_from = w.init_from
    c.data.sources = [dict(kind="chat_jsonl", path=transcripts_path(run), weight=1.0)]
    c.data.update(add_bos=False, seq_len=w.seq_len, batch_size=w.batch_size)
    c.step.grad_accum = 1  # the warm start's own small batch (the planned accumulation is for sft's batch)
    c.steps = c.optim.total_steps = steps
    c.optim.update(lr=lr, warmup_steps=max(1, steps // 15))
    c.checkpoint.every = steps
    c.log.progress = False
    return c


def sft_configs(run: RLExperimentConfig) -> list:
    """The warm start's SFT runs in order; the last writes `init_from`. One run, or with `sft.mtp_steps` two: the trunk
    alone (the model without MTP depths, in `<init_from>/../sft_trunk`) for steps − mtp_steps, then the whole model
    from its weights, the depths grown fresh (train/init_from.stage_model), for mtp_steps at `sft.mtp_lr`."""
    w = run.sft
    if not w.mtp_steps:
        return [sft_config(run)]
    trunk = sft_config(run, steps=w.steps - w.mtp_steps)
    trunk.model.num_mtp_layers = 0
    trunk.workdir += "_trunk"
    whole = sft_config(run, steps=w.mtp_steps, lr=w.mtp_lr or w.lr)
    whole.init_from = str(Path(trunk.workdir) / "checkpoints")
    return [trunk, whole]


def transcripts_path(run: RLExperimentConfig) -> str:
    """Where the oracle transcripts go."""
    return str(Path(run.init_from).parent.parent / "sft_data" / "oracle.jsonl")


def write_demonstrations(run: RLExperimentConfig) -> dict:
    """The warm start's transcripts (sft.demonstrations): the generated family's oracle, the training Harbor tasks'
    solve.sh replayed as terminal tool calls, or a ready JSONL (checked, then copied)."""
    w = run.sft
    if w.demonstrations.endswith(".jsonl"):
        count = read_transcripts(w.demonstrations)
        Path(transcripts_path(run)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(w.demonstrations, transcripts_path(run))
        return {"written": count, "from": w.demonstrations}
    with Environment(pool_size=run.env.pool_size, limits=sandbox_limits(run.env)) as env:
        worker = env_worker_for(run, env, run.tokenizer.build())
        if w.demonstrations == "solutions":
            tasks = [t for spec in sources.parse_mix(run.tasks) if spec.kind in sources.HARBOR_KINDS
                     for t in orchestrator.source_tasks(run, spec, "train").tasks]
            if not tasks:
                raise ValueError(f"sft.demonstrations='solutions' but tasks={run.tasks!r} has no Harbor source with "
                                 "training tasks; expected a suite: or generated: entry")
            return write_solution_transcripts(worker, tasks, transcripts_path(run))
        family = sources.family_module(sources.warm_start_family(run.tasks))  # toy, or pkg with tasks=pkg
        return write_oracle_transcripts(worker, family.task_set(w.transcripts, w.seed + 7, tuple(run.rl.levels)),
                                        transcripts_path(run), w.read_prob, w.seed, error_rate=w.teacher_error,
                                        flaw_rates=w.flaw_rates, retest=w.teacher_retest)


def prepare(config) -> dict:
    """Write oracle transcripts and train the SFT warm start unless `init_from` already holds a checkpoint."""
    run = orchestrator.rl_config(config)
    try:  # a stage's checkpoints (or its workdir), a converted checkpoint or an HF directory: RL starts from it
        found = init_from.resolve(run.init_from)
        return {"sft": "found", "init_from": found.path, "kind": found.kind}
    except FileNotFoundError:
        pass
    from composer2_jax.train.loop import train

    written = write_demonstrations(run)
    runs = [train(c) for c in sft_configs(run)]  # a run that finished before an interruption resumes as done
    losses = [x for r in runs for x in r.losses] or [float("nan")]
    return {"sft": "trained", **written, "sft_first_loss": losses[0], "sft_last_loss": losses[-1],
            "sft_seconds": round(sum(r.seconds for r in runs), 1),
            **({"sft_trunk_seconds": round(runs[0].seconds, 1)} if len(runs) > 1 else {})}


def evaluate_checkpoint(config, checkpoint_dir: str) -> dict[str, float]:
    """The held-out evaluation of the newest weights in a checkpoint folder (RL or SFT)."""
    from composer2_jax.bench.engine_policy import load_checkpoint
    from composer2_jax.rl.services.evaluator import Evaluator
    from composer2_jax.rl.services.weights import Weights

    run = orchestrator.rl_config(config)
    engine, _ = load_checkpoint(checkpoint_dir)
    tok = run.tokenizer.build()
    with Environment(pool_size=run.env.pool_size) as env:
        evaluator = Evaluator(env_worker_for(run, env, tok), orchestrator.heldout_tasks(run), engine.cfg,
                              run.rollout, end_token_id(tok), run.rl.eval_samples,
                              vocab_limit=orchestrator.vocab_limit(tok, engine.cfg.vocab_size))
        version = int(Checkpointer(checkpoint_dir, async_save=False).latest_step() or 0)
        return evaluator.evaluate(Weights(version, engine.params, engine.router_state))


def pipeline_config(preset: str, root: str, prev: str):
    """The RL stage of experiments/pipeline.py: warm start from the pipeline's SFT weights, a few versions."""
    c = get_config(preset)
    c.workdir, c.init_from, c.sft.init_from = f"{root}/rl", f"{root}/rl/sft/checkpoints", prev
    if preset == "toy":  # the whole pipeline fits 15 minutes of 2 cores (README; seconds per stage in its table)
        # The toy experiment's warm start and RL (benchmarks/learning/rl_learning.py; docs/rl.md "The toy
        # experiment"), shortened to PIPELINE_VERSIONS: its 600 transcripts and 165 SFT steps (from the pipeline's
        # SFT weights here) give a start that passes some held-out tasks, where the earlier 40 steps over 200
        # transcripts passed none and RL had no signal; whole episodes (no summaries: its budget of 260 makes half
        # the episodes summarise, which a start this small does not learn well). The evaluation stage scores the
        # final weights and this start on 64 held-out tasks × 2 samples, as the toy experiment does.
        c.harness.update(max_summaries=0, context_budget=PIPELINE_CONTEXT_BUDGET)
        c.rl.update(steps=PIPELINE_VERSIONS, eval_every=0, eval_tasks=64, eval_samples=2)  # evaluated after the stage
    return c


# The toy experiment gained 17–19 points by v40 (docs/rl.md, "The toy experiment"); 40 versions took the whole job to
# 14 min 26 s (2026-12-07), so 30 keep it inside 15 minutes with the installs and the start's evaluation.
PIPELINE_VERSIONS = 30
PIPELINE_CONTEXT_BUDGET = 352  # holds a whole toy episode (≤ rollout.prompt_len − 48)


def run_stage(preset: str, root: str, prev: str) -> tuple[dict, str]:
    """experiments/pipeline.py stage 'rl': (summary line, checkpoint folder) — pass rate and reward of the first and
    last version's batch, the last batch's reward terms, and the fraction of episodes that summarised."""
    c = pipeline_config(preset, root, prev)
    warm = prepare(c)
    r = orchestrator.run_rl(c)
    first, last = r.history[0], r.history[-1]
    terms = {k: round(last[f"batch/term/{k}"], 4) for k in TERMS if f"batch/term/{k}" in last}
    line = dict(stage="rl", versions=r.final_version, sft_last_loss=round(warm.get("sft_last_loss", float("nan")), 4),
                pass_start=round(first["batch/pass_rate"], 4), pass_end=round(last["batch/pass_rate"], 4),
                reward_start=round(first["batch/reward"], 4), reward_end=round(last["batch/reward"], 4),
                reward_terms=terms,
                summary_fraction=round(sum(m["batch/summary_fraction"] for m in r.history) / len(r.history), 4),
                summary_tokens=round(sum(m["batch/summary_tokens"] for m in r.history) / len(r.history), 1),
                episodes=r.counters.get("episodes_done", 0), seconds=round(r.seconds, 1),
                draft_acceptance=[round(m["rollout/acceptance"], 4) for m in r.history if "rollout/acceptance" in m])
    return line, f"{root}/rl/checkpoints"


def evaluate_stage(preset: str, root: str, prev: str) -> tuple[dict, str]:
    """experiments/pipeline.py stage 'evaluate': held-out pass rate and effort of the final weights, and the pass rate
    of the RL stage's SFT start on the same tasks (`pass_rate_start`) when the pipeline trained one."""
    config = pipeline_config(preset, root, prev)
    m = evaluate_checkpoint(config, prev)
    keep = ("eval/pass_rate", "eval/pass_rate/easy", "eval/pass_rate/hard", "eval/effort/easy", "eval/effort/hard")
    line = dict(stage="evaluate", checkpoint=prev, **{k.split("/", 1)[1]: round(m[k], 4) for k in keep if k in m})
    start = config.init_from  # the RL stage's version 0: its warm start
    if start != prev and Path(start).is_dir() and Checkpointer(start, async_save=False).latest_step() is not None:
        line["pass_rate_start"] = round(evaluate_checkpoint(config, start)["eval/pass_rate"], 4)
    return line, prev


def heldout_transcripts(run: RLExperimentConfig, n: int) -> list[dict]:
    """n oracle transcripts (the oracle never errs here) of the warm-start family's held-out split, written once
    under the run's workdir (probe/)."""
    family = sources.family_module(sources.warm_start_family(run.tasks))
    path = Path(run.workdir) / "probe" / f"heldout_oracle_{n}.jsonl"
    if not path.exists():
        with Environment(pool_size=run.env.pool_size, limits=sandbox_limits(run.env)) as env:
            worker = env_worker_for(run, env, run.tokenizer.build())
            tasks = family.task_set(n, run.sft.seed + 7, tuple(run.rl.levels), split="heldout")
            write_oracle_transcripts(worker, tasks, path, run.sft.read_prob, run.sft.seed)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def probe_copying(run: RLExperimentConfig, checkpoint_dir: str, n: int) -> dict:
    """The copy probe (rl/copy_probe.py) of a checkpoint's newest weights over n held-out oracle transcripts:
    every copied word, and the family's own names (`NAMES`: the pkg family's module names)."""
    family = sources.family_module(sources.warm_start_family(run.tasks))
    got = copy_probe.probe_checkpoint(checkpoint_dir, heldout_transcripts(run, n), getattr(family, "NAMES", None),
                                      run.tokenizer.build())
    return {k: {m: _rounded(x) for m, x in v.items()} if isinstance(v, dict) else v for k, v in got.items()}


def _rounded(x):
    """A probe figure (or a list of them, e.g. by order) to 4 decimals."""
    return [_rounded(y) for y in x] if isinstance(x, list) else round(x, 4)


def main(argv, probe: int = 0) -> dict:
    """Warm start (if needed), then RL; prints and returns a JSON summary. `probe` > 0: the copy probe of the start
    and the final weights over that many held-out oracle transcripts (`copy_probe` in the summary)."""
    from experiments.main import parse, quiet_logs

    saved_argv, sys.argv = sys.argv, list(argv)  # config_flags registers --config.KEY overrides from sys.argv
    try:
        config, frozen = parse(__file__, "toy", argv, orchestrator.rl_config)
    finally:
        sys.argv = saved_argv
    if flags.FLAGS.dry_run:  # the trainer's update compiled as configured; nothing runs (experiments/dry_run.py)
        from composer2_jax.plan.dry_run import rl_shape

        plan = plans.plan_for(frozen.preset, "rl")
        return dry_run.run(config, lambda c: rl_shape(orchestrator.rl_config(c)), plan.chip if plan else "",
                           config.trainer.mesh)
    quiet_logs()
    summary = prepare(config)
    r = orchestrator.run_rl(config)
    summary.update(final_version=r.final_version, seconds=round(r.seconds, 1), counters=r.counters,
                   evals=[{k: round(v, 4) for k, v in e.items()} for e in r.evals])
    if probe:
        summary["copy_probe"] = {"start": probe_copying(frozen, frozen.init_from, probe),
                                 "end": probe_copying(frozen, str(Path(frozen.workdir) / "checkpoints"), probe)}
    print(json.dumps(summary))
    return summary


def warm_start_main(argv, probe: int = 0) -> dict:
    """Only the warm start (trained unless `init_from` holds one) and its held-out evaluation (and with `probe` > 0
    its copy probe over that many held-out oracle transcripts); prints and returns a JSON summary
    (benchmarks/learning/rl_learning.py `--sft-only`)."""
    from experiments.main import parse, quiet_logs

    saved_argv, sys.argv = sys.argv, list(argv)
    try:
        config, run = parse(__file__, "toy", argv, orchestrator.rl_config)
    finally:
        sys.argv = saved_argv
    quiet_logs()
    summary = prepare(config)
    summary["eval"] = {k: round(v, 4) for k, v in evaluate_checkpoint(config, run.init_from).items()}
    if probe:
        summary["copy_probe"] = probe_copying(run, run.init_from, probe)
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main(sys.argv)
