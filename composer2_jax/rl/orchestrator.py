"""The RL run: config → services → the loop (embedded threads, or Ray actors) → metrics, checkpoints, plots.

    run_rl(config)   config: the ConfigDict of experiments/rl.py (frozen here, at the factory boundary)

Start: the trainer takes the SFT weights (`init_from`) as version 0, or resumes workdir/checkpoints (train state,
weight version, counters, task-sampler position; groups in flight at the checkpoint are regenerated). Each new
version is logged to workdir/logs/metrics.jsonl; every `rl.eval_every` versions the evaluator runs the held-out
tasks; every `checkpoint.every` versions (and at the end) the state is saved. The curves go to workdir/curves.png.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any, Callable

import ml_collections

from composer2_jax.config import model_config
from composer2_jax.data import tokenizer as tk
from composer2_jax.env import Environment, SandboxLimits
from composer2_jax.env.harness import HarnessConfig
from composer2_jax.losses.rl import PolicyLossConfig
from composer2_jax.rl import tasks as task_lib
from composer2_jax.rl.plots import plot_curves
from composer2_jax.rl.rewards import RewardConfig
from composer2_jax.rl.services.env_worker import EnvWorker
from composer2_jax.rl.services.evaluator import Evaluator
from composer2_jax.rl.services.local import LocalOrchestrator, LoopConfig
from composer2_jax.rl.services.records import Counters
from composer2_jax.rl.services.rollout import RolloutConfig, RolloutWorker
from composer2_jax.rl.services.sampler import TaskSampler
from composer2_jax.rl.services.trainer import Trainer, TrainerConfig
from composer2_jax.rl.services.weights import WeightStore
from composer2_jax.train import optim as optim_lib
from composer2_jax.train.checkpoint import Checkpointer
from composer2_jax.train.loop import _load_stage_params
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


def frozen(c: ml_collections.ConfigDict | dict, cls, **extra):
    """A frozen dataclass from a config section, rejecting unknown keys by name."""
    d = dict(c.to_dict() if isinstance(c, ml_collections.ConfigDict) else c, **extra)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} keys {unknown}; expected a subset of {sorted(known)}")
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


def harness_config(config) -> HarnessConfig:
    """The harness limits and prompts of the run."""
    return frozen(config.harness, HarnessConfig)


def check_shapes(hc: HarnessConfig, rc: RolloutConfig, seq_len: int, tokenizer: tk.Tokenizer) -> None:
    """ValueError unless every context fits the rollout prompt and every segment the trainer's rows."""
    reply = max(hc.max_new_tokens, hc.summary_tokens)
    if reply > rc.max_new_tokens:
        raise ValueError(f"harness replies of up to {reply} tokens (max_new_tokens / summary_tokens) exceed "
                         f"rollout.max_new_tokens={rc.max_new_tokens}")
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


def rollout_config(config, tokenizer: tk.Tokenizer, model_vocab: int) -> RolloutConfig:
    """The rollout engine's settings of the run (sampling restricted to the tokenizer's ids)."""
    return frozen(config.rollout, RolloutConfig, vocab_limit=vocab_limit(tokenizer, model_vocab))


def make_env_worker(config, env, tokenizer: tk.Tokenizer) -> EnvWorker:
    """The environment worker over `env` with the run's tool view, harness and reward."""
    reward = frozen(config.reward, RewardConfig)
    return EnvWorker(env, tokenizer, harness_config(config), reward, tuple(config.env.tools),
                     config.env.schemas_in_prompt, grade_timeout_s=config.env.grade_timeout_s)


def training_tasks(config) -> list[task_lib.CodingTask]:
    """The training task list (train content split)."""
    r = config.rl
    return task_lib.task_set(r.train_tasks, r.task_seed, tuple(r.levels), "train")


def heldout_tasks(config) -> list[task_lib.CodingTask]:
    """The held-out evaluation tasks (the held-out content split; level 0 has few contents, so some repeat)."""
    r = config.rl
    return task_lib.task_set(r.eval_tasks, r.heldout_seed, tuple(r.levels), "heldout")


def make_trainer(config, mcfg, tokenizer: tk.Tokenizer) -> Trainer:
    """The trainer with the run's optimizer, batch layout and loss (π_θ over the rollout engine's ids)."""
    oc = frozen(config.optim, optim_lib.OptimConfig)
    loss = frozen(config.loss, PolicyLossConfig)
    tc = frozen(config.trainer, TrainerConfig, groups_per_batch=config.rl.groups_per_batch, loss=loss,
                temperature=config.rollout.temperature, vocab_limit=vocab_limit(tokenizer, mcfg.vocab_size))
    return Trainer(mcfg, oc, tc, seed=config.seed)


def start_state(config, trainer: Trainer, ckpt: Checkpointer) -> dict[str, Any]:
    """Resume from the run's checkpoint, or load the warm start; the saved loop state ({} when fresh)."""
    if ckpt.latest_step() is not None:
        version, state, data, _ = ckpt.restore(trainer.abstract, fallback=config.checkpoint.fallback)
        trainer.restore(state, int(data.get("version", version)))
        log.info("resumed RL from version %d", trainer.version)
        if config.init_from and trainer.tc.loss.kl_coef > 0:  # the KL's reference is the warm start again
            trainer.set_reference(*_load_stage_params(config.init_from, trainer.abstract))
        return data
    if config.init_from:
        params, router = _load_stage_params(config.init_from, trainer.abstract)
        trainer.load_params(params, router)
    return {}


def save(ckpt: Checkpointer, trainer: Trainer, counters: Counters, sampler: TaskSampler, config) -> None:
    """Checkpoint the train state with the loop state (version, counters, sampler position)."""
    data = {"version": trainer.version, "counters": counters.snapshot(), "sampler_position": sampler.position}
    ckpt.save(trainer.version, trainer.state, data, json.loads(config.to_json()))


def run_rl(config: ml_collections.ConfigDict, hook: Callable[[dict[str, Any]], None] | None = None) -> RLResult:
    """Run (or resume) RL as configured; `hook(metrics)` after each version is logged (see the module docstring)."""
    t0 = time.time()
    mcfg = model_config(config.model)
    tokenizer = tk.make_tokenizer(config.tokenizer.name, config.tokenizer.path or None)
    workdir = Path(config.workdir)
    trainer = make_trainer(config, mcfg, tokenizer)
    ckpt = Checkpointer(workdir / "checkpoints", config.checkpoint.keep, async_save=False)
    saved = start_state(config, trainer, ckpt)
    counters = Counters(saved.get("counters"))
    sampler = TaskSampler(training_tasks(config), config.seed, saved.get("sampler_position", 0))
    writer = MetricWriter(workdir / "logs", enabled=config.log.write)
    rc = rollout_config(config, tokenizer, mcfg.vocab_size)
    stop_id = tokenizer.special_id(tk.IM_END)
    check_shapes(harness_config(config), rc, trainer.tc.seq_len, tokenizer)
    lc = frozen(config.rl.loop, LoopConfig, eta=config.rl.eta, samples=config.rl.samples, steps=config.rl.steps)
    evals: list[dict[str, float]] = []
    limits = SandboxLimits(timeout_s=config.env.command_timeout_s)
    with Environment(pool_size=config.env.pool_size, limits=limits) as env:
        worker = make_env_worker(config, env, tokenizer)
        evaluator = Evaluator(worker, heldout_tasks(config), mcfg, rc, stop_id, config.rl.eval_samples,
                              config.rl.episode_threads)

        def evaluate() -> None:
            m = evaluator.evaluate(trainer.weights())
            evals.append(m)
            writer.write(trainer.version, m)
            log.info("eval at version %d: %s", trainer.version, _brief(m))

        def on_version(m: dict[str, Any]) -> None:
            writer.write(trainer.version, m)
            log.info("version %d: %s", trainer.version, _brief(m))
            if hook is not None:
                hook(m)
            if trainer.version % config.checkpoint.every == 0 or trainer.version == lc.steps:
                save(ckpt, trainer, counters, sampler, config)
            if config.rl.eval_every and trainer.version % config.rl.eval_every == 0:
                evaluate()

        if config.rl.eval_every and trainer.version == 0:
            evaluate()
        history = run_loop(config, trainer, worker, sampler, lc, rc, stop_id, counters, on_version)
        if config.rl.eval_every and (not evals or evals[-1]["eval/version"] != trainer.version):
            evaluate()
    ckpt.close()
    writer.close()
    if config.log.write and config.rl.plot:
        plot_curves(workdir / "logs" / "metrics.jsonl", workdir / "curves.png", f"RL {config.preset}")
    return RLResult(history, evals, counters.snapshot(), trainer.version, str(workdir), time.time() - t0,
                    dict(saved.get("counters", {})))


def run_loop(config, trainer: Trainer, worker: EnvWorker, sampler: TaskSampler, lc: LoopConfig, rc: RolloutConfig,
             stop_id: int, counters: Counters, on_version) -> list[dict[str, Any]]:
    """The loop on the configured backend: 'local' (threads in this process) or 'ray' (actors)."""
    if config.rl.backend == "local":
        store = WeightStore()
        rollout = RolloutWorker(trainer.model_cfg, store, rc, stop_id, counters)
        return LocalOrchestrator(trainer, rollout, worker, sampler, lc, store, counters).run(on_version)
    if config.rl.backend == "ray":
        import ray  # noqa: PLC0415 - ray is optional

        from composer2_jax.rl.services.ray_loop import RayOrchestrator  # noqa: PLC0415

        if not ray.is_initialized():
            ray.init(address=config.rl.ray.address or None, include_dashboard=False)
        return RayOrchestrator(config, trainer, sampler, lc, counters).run(on_version)
    raise ValueError(f"rl.backend={config.rl.backend!r}; expected local | ray")


def _brief(m: dict[str, Any]) -> str:
    """The headline numbers of a metrics dict, for the log."""
    keys = [k for k in m if k.split("/")[-1] in ("reward", "pass_rate", "easy", "hard", "loss", "staleness_max")
            or k in ("eval/pass_rate", "batch/pass_rate")]
    return ", ".join(f"{k}={m[k]:.3f}" for k in keys if isinstance(m[k], float))

