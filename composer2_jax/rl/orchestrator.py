"""The RL run: config → services → the loop (embedded threads, or Ray actors) → metrics, checkpoints, plots.

    run_rl(config)   config: the ConfigDict of experiments/rl.py, frozen here (`rl_config`) into the
                     RLExperimentConfig every service receives (rl/run_config.py)

Start: the trainer takes the SFT weights (`init_from`) as version 0, with the model config they recorded (YaRN,
MTP depth, vocabulary; changed only by the RL config's explicit model edits: train/loop.inherited_model), or
resumes workdir/checkpoints (train state, weight version, counters, curriculum position; groups in flight at the
checkpoint are regenerated). Each new version is logged to workdir/logs/metrics.jsonl; the evaluator, a service
of its own (thread or Ray actor, its own environment), pulls every `rl.eval_every`-th published version and runs
the held-out tasks while training goes on (and the final version once training ends); every `checkpoint.every`
versions (and at the end) the state is saved. The curves go to workdir/curves.png.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable

from composer2_jax import schema
from composer2_jax.data import tokenizer as tk
from composer2_jax.data.chat import end_token_id
from composer2_jax.env import Environment
from composer2_jax.env.harness import HarnessConfig
from composer2_jax.rl import sources
from composer2_jax.rl.curriculum import Curriculum
from composer2_jax.rl.plots import plot_curves
from composer2_jax.rl.records import Counters
from composer2_jax.rl.rewards import TERMS
from composer2_jax.rl.run_config import RLExperimentConfig
from composer2_jax.rl.services.env_worker import EnvWorker, env_worker_for, sandbox_limits
from composer2_jax.rl.services.evaluator import EvalService, Evaluator
from composer2_jax.rl.services.local import LocalOrchestrator
from composer2_jax.rl.services.rollout import RolloutConfig, RolloutWorker
from composer2_jax.rl.services.trainer import PolicyLaw, Trainer
from composer2_jax.rl.services.weights import WeightStore
from composer2_jax.train.checkpoint import Checkpointer
from composer2_jax.train.init_from import preset_default_tokenizer, stage_tokenizer
from composer2_jax.train.loop import config_record, inherited_model, load_stage_params
from composer2_jax.train.metrics import MetricWriter

log = logging.getLogger(__name__)


@dataclasses.dataclass
class RLResult:
    """What a run returns: per-version metrics, evaluations, counters and where things were written."""

    history: list[dict[str, Any]]
    evals: list[dict[str, float]]
    counters: dict[str, int]
    final_version: int
    workdir: str
    seconds: float
    start_counters: dict[str, int] = dataclasses.field(default_factory=dict)  # as restored ({} on a fresh run)


def rl_config(config) -> RLExperimentConfig:
    """The factory boundary of the RL run: its ConfigDict (or an RLExperimentConfig) → frozen."""
    return schema.from_config_dict(RLExperimentConfig, config)


def check_shapes(hc: HarnessConfig, rc: RolloutConfig, seq_len: int, tokenizer: tk.Tokenizer) -> None:
    """ValueError unless every context fits the rollout prompt and every segment the trainer's rows (the reply
    length against the rollout's is checked by RLExperimentConfig itself)."""
    reply = max(hc.max_new_tokens, hc.summary_tokens)
    summary_prompt = len(tokenizer.encode(hc.summary_prompt)) + 16  # + the user and assistant headers
    if hc.context_budget + summary_prompt > rc.prompt_len:
        raise ValueError(f"contexts reach context_budget={hc.context_budget} + a summary request of "
                         f"~{summary_prompt} tokens, more than rollout.prompt_len={rc.prompt_len}")
    if hc.context_budget + summary_prompt + reply > seq_len:
        raise ValueError(f"a segment can reach {hc.context_budget + summary_prompt + reply} tokens, more than "
                         f"trainer.seq_len={seq_len}")


def vocab_limit(tokenizer: tk.Tokenizer, model_vocab: int) -> int:
    """The ids the policy may emit: the tokenizer's, when the model's vocabulary is padded beyond it (0 = all).

    The rollout engine never samples a padded id and the trainer's π_θ is the softmax over the same ids, so μ and
    π_θ stay one family; a padded id would otherwise end the reply undecodable, and its logit, never trained down
    (the id is cut before training), is free to drift up under the optimizer.
    """
    if tokenizer.vocab_size > model_vocab:
        raise ValueError(f"the tokenizer has {tokenizer.vocab_size} ids but the model's vocab_size is {model_vocab}; "
                         f"expected vocab_size ≥ the tokenizer's")
    return tokenizer.vocab_size if tokenizer.vocab_size < model_vocab else 0


def source_tasks(run: RLExperimentConfig, spec: sources.SourceSpec, split: str) -> sources.SourceTasks:
    """The tasks of one curriculum entry in one split (the toy family: its train list or its held-out set)."""
    sc, rl = run.sources, run.rl
    if spec.kind in sources.FAMILIES:
        n, seed = (rl.train_tasks, rl.task_seed) if split == "train" else (rl.eval_tasks, rl.heldout_seed)
        return sources.family_tasks(spec, split, n, seed, rl.levels)
    if spec.kind == "suite":
        return sources.harbor_tasks(spec, spec.arg, split, sc.heldout_frac, sc.heldout_versions)
    return sources.generated_tasks(spec, split, sc)


def training_curriculum(run: RLExperimentConfig, position: int = 0) -> Curriculum:
    """The curriculum of `run.tasks` over the train splits, resumed at `position`. A Harbor task whose name is held
    out by any source (a generated copy of a held-out suite task, say) is not trained on."""
    held = {t.task.name for t in _heldout_all(run) if isinstance(t, sources.HarborTask)}
    entries = []
    for spec in sources.parse_mix(run.tasks):
        got = source_tasks(run, spec, "train")
        train = [t for t in got.tasks if not (isinstance(t, sources.HarborTask) and t.task.name in held)]
        if not train:
            raise ValueError(f"task source {spec.name!r} has no training task (skipped: {got.skipped}); its "
                             f"held-out share is sources.heldout_frac={run.sources.heldout_frac}")
        log.info("task source %s: %d training tasks, %d skipped, %d held out elsewhere", spec.name, len(train),
                 len(got.skipped), len(got.tasks) - len(train))
        entries.append((train, spec.weight))
    return Curriculum(entries, run.seed, position)


def _heldout_specs(run: RLExperimentConfig) -> list[sources.SourceSpec]:
    """The curriculum's sources and the suite versions held out whole."""
    specs = list(sources.parse_mix(run.tasks))
    named = {s.arg for s in specs}
    return specs + [sources.SourceSpec("suite", v, 1.0) for v in run.sources.heldout_versions if v not in named]


def _heldout_all(run: RLExperimentConfig) -> list:
    """Every held-out task of every Harbor source (untruncated)."""
    return [t for spec in _heldout_specs(run) if spec.kind not in sources.FAMILIES
            for t in source_tasks(run, spec, "heldout").tasks]


def heldout_tasks(run: RLExperimentConfig) -> list:
    """The held-out evaluation tasks: the toy family's content split, and at most `sources.eval_tasks` held-out
    tasks of each Harbor source and of each suite version held out whole."""
    out = []
    for spec in _heldout_specs(run):
        got = source_tasks(run, spec, "heldout").tasks
        out += list(got if spec.kind in sources.FAMILIES else got[:run.sources.eval_tasks])
    if not out:
        raise ValueError(f"tasks={run.tasks!r} holds no held-out task; raise sources.heldout_frac or name "
                         f"sources.heldout_versions")
    return out


def policy_law(run: RLExperimentConfig, tokenizer: tk.Tokenizer) -> PolicyLaw:
    """What the rollouts sample and π_θ is: the rollout temperature over the tokenizer's ids."""
    return PolicyLaw(run.rollout.temperature, vocab_limit(tokenizer, run.model.vocab_size))


def make_trainer(run: RLExperimentConfig, tokenizer: tk.Tokenizer) -> Trainer:
    """The trainer with the run's optimizer, batch layout and loss (π_θ over the rollout engine's ids)."""
    return Trainer(run.model, run.optim, run.trainer, run.loss, policy_law(run, tokenizer), seed=run.seed)


def start_state(run: RLExperimentConfig, trainer: Trainer, ckpt: Checkpointer) -> dict[str, Any]:
    """Resume from the run's checkpoint, or load the warm start; the saved loop state ({} when fresh)."""
    if ckpt.latest_step() is not None:
        version, state, data, _ = ckpt.restore(trainer.abstract, fallback=run.checkpoint.fallback)
        trainer.restore(state, int(data.get("version", version)))
        log.info("resumed RL from version %d", trainer.version)
        if run.init_from and trainer.loss.kl_coef > 0:  # the KL's reference is the warm start again
            trainer.set_reference(*load_stage_params(run.init_from, trainer.abstract))
        return data
    if run.init_from:
        params, router = load_stage_params(run.init_from, trainer.abstract)
        trainer.load_params(params, router)
    return {}


def save(ckpt: Checkpointer, trainer: Trainer, counters: Counters, curriculum: Curriculum,
         run: RLExperimentConfig) -> None:
    """Checkpoint the train state with the loop state (version, counters, curriculum position)."""
    data = {"version": trainer.version, "counters": counters.snapshot(), "curriculum_position": curriculum.position}
    ckpt.save(trainer.version, trainer.state, data, config_record(run))


def run_rl(config, hook: Callable[[dict[str, Any]], None] | None = None) -> RLResult:
    """Run (or resume) RL as configured; `hook(metrics)` after each version is logged (see the module docstring)."""
    t0 = time.time()
    run = rl_config(config)
    tokenizer_cfg = stage_tokenizer(run.tokenizer, run.init_from, preset_default_tokenizer(run.preset))
    run = dataclasses.replace(run, model=inherited_model(run.preset, run.model, run.init_from),  # the SFT's model
                              tokenizer=tokenizer_cfg)
    if run.rollout.num_draft > run.model.num_mtp_layers:  # drafts follow the model trained, not the preset
        log.info("rollout.num_draft %d → %d: the warm start's model has %d MTP depth(s)", run.rollout.num_draft,
                 run.model.num_mtp_layers, run.model.num_mtp_layers)
        run = dataclasses.replace(run, rollout=dataclasses.replace(run.rollout, num_draft=run.model.num_mtp_layers))
    tokenizer = run.tokenizer.build()
    workdir = Path(run.workdir)
    started = None
    if run.rl.backend == "ray" and run.rl.ray.weight_sync == "device":  # the actors and this driver join one job
        from composer2_jax.rl.services.ray_loop import join_device_sync_job

        _ray_init(run)
        started = join_device_sync_job(run, end_token_id(tokenizer), vocab_limit(tokenizer,
                                                                                      run.model.vocab_size))
    trainer = make_trainer(run, tokenizer)
    # with device sync the job's other processes are rollout actors: the driver checkpoints alone
    ckpt = Checkpointer(workdir / "checkpoints", run.checkpoint.keep, async_save=False,
                        processes={0} if started is not None else None)
    saved = start_state(run, trainer, ckpt)
    counters = Counters(saved.get("counters"))
    # the curriculum's position; runs saved before the rename call it sampler_position
    curriculum = training_curriculum(run, saved.get("curriculum_position", saved.get("sampler_position", 0)))
    writer = MetricWriter(workdir / "logs", enabled=run.log.write)
    stop_id = end_token_id(tokenizer)
    check_shapes(run.harness, run.rollout, run.trainer.seq_len, tokenizer)
    lock = threading.Lock()  # the trainer's and the evaluator's threads share the writer

    def write(step: int, m: dict[str, Any]) -> None:
        with lock:
            writer.write(step, m)

    store = WeightStore()
    evals = start_evaluator(run, tokenizer, store, trainer, write)
    with Environment(pool_size=run.env.pool_size, limits=sandbox_limits(run.env)) as env:
        parts = LoopParts(trainer, env_worker_for(run, env, tokenizer), curriculum, counters, store)

        def on_version(m: dict[str, Any]) -> None:
            write(trainer.version, m)
            log.info("version %d: %s", trainer.version, progress_line(m))
            if hook is not None:
                hook(m)
            if trainer.version % run.checkpoint.every == 0 or trainer.version == run.rl.steps:
                save(ckpt, trainer, counters, curriculum, run)

        try:
            history = run_loop(run, parts, stop_id, on_version, started)
        finally:
            results = evals.finish(trainer.version) if evals is not None else []
    if evals is not None and evals.errors:
        log.warning("evaluations failed: %s", "; ".join(evals.errors))
    ckpt.close()
    writer.close()
    if run.log.write and run.rl.plot:
        plot_curves(workdir / "logs" / "metrics.jsonl", workdir / "curves.png", f"RL {run.preset}")
    return RLResult(history, results, counters.snapshot(), trainer.version, str(workdir), time.time() - t0,
                    dict(saved.get("counters", {})))


def start_evaluator(run: RLExperimentConfig, tokenizer: tk.Tokenizer, store: WeightStore, trainer: Trainer,
                    write: Callable[[int, dict[str, Any]], None]) -> EvalService | None:
    """The held-out evaluation as its own service (None when rl.eval_every = 0): a thread with its own environment
    and engine that pulls the versions `store` publishes (rl/services/evaluator.py); it is given the final version
    when training ends. Under Ray the same service runs in its own actor (ray_actors.EvalActor)."""
    if not run.rl.eval_every:
        return None
    if run.rl.backend == "ray":
        from composer2_jax.rl.services.ray_actors import RayEvalService

        _ray_init(run)
        return RayEvalService(run, store, write, heldout_tasks(run), trainer.version + (trainer.version > 0),
                              trainer.law.vocab_limit)
    env = Environment(pool_size=min(run.env.pool_size, 4), limits=sandbox_limits(run.env))  # the evaluator's own
    evaluator = Evaluator(env_worker_for(run, env, tokenizer), heldout_tasks(run), run.model, run.rollout,
                          end_token_id(tokenizer), run.rl.eval_samples, run.rl.episode_threads,
                          vocab_limit=trainer.law.vocab_limit)

    def on_result(m: dict[str, Any]) -> None:
        write(int(m["eval/version"]), m)
        log.info("eval at version %d: %s", int(m["eval/version"]), progress_line(m))

    start = trainer.version + (trainer.version > 0)  # a resumed run evaluated its last version already
    service = EvalService(store, evaluator.evaluate, run.rl.eval_every, on_result, start, on_close=env.shutdown)
    service.start()
    return service


@dataclasses.dataclass(frozen=True)
class LoopParts:
    """The running pieces of one RL run that `run_loop` drives."""

    trainer: Trainer  # the policy trained; the orchestrator publishes its weights to `store` after each update
    worker: EnvWorker  # runs and grades episodes on the local backend (Ray's env actors make their own)
    curriculum: Curriculum  # the training tasks in order, resumable at its position
    counters: Counters  # episode and version counts, checkpointed with the run
    store: WeightStore  # the published versions: the rollout side and the evaluator service pull from it


def run_loop(run: RLExperimentConfig, parts: LoopParts, stop_id: int, on_version,
             started: tuple | None = None) -> list[dict[str, Any]]:
    """The loop on the configured backend: 'local' (threads in this process) or 'ray' (actors); the loop publishes
    the trainer's weights after each update as a version in `parts.store` (the evaluator service pulls from it)."""
    trainer, counters, store = parts.trainer, parts.counters, parts.store
    if run.rl.backend == "local":
        rollout = RolloutWorker(run.model, store, run.rollout, stop_id, counters, vocab_limit=trainer.law.vocab_limit)
        return LocalOrchestrator(trainer, rollout, parts.worker, parts.curriculum, run.rl, store,
                                 counters).run(on_version)
    from composer2_jax.rl.services.ray_loop import RayOrchestrator

    _ray_init(run)
    return RayOrchestrator(run, trainer, parts.curriculum, counters, stop_id, store, started).run(on_version)


def _ray_init(run: RLExperimentConfig) -> None:
    """Join or start the Ray cluster of rl.ray.address (once per process)."""
    import ray

    if not ray.is_initialized():
        ray.init(address=run.rl.ray.address or None, include_dashboard=False)


def progress_line(m: dict[str, Any]) -> str:
    """The headline numbers of a metrics dict, for the log, then every reward term: mean (fraction non-zero)."""
    keys = [k for k in m if k.split("/")[-1] in ("reward", "pass_rate", "easy", "hard", "loss", "staleness_max")
            and "/term" not in k or k in ("eval/pass_rate", "batch/pass_rate")]
    line = ", ".join(f"{k}={m[k]:.3f}" for k in keys if isinstance(m[k], float))
    prefix = next((p for p in ("batch/", "eval/") if f"{p}term/success" in m), None)
    if prefix is None:
        return line
    terms = " ".join(f"{t}={m[f'{prefix}term/{t}']:+.3f}({m[f'{prefix}term_nonzero/{t}']:.2f})" for t in TERMS)
    return f"{line} | terms: {terms}"
