"""The training run: config → mesh → data → state (fresh, resumed, or from a previous stage) → steps → checkpoints.

Determinism: the same config, seed and data give identical losses, also across a kill and resume (the
iterator state is checkpointed with the train state and restored with it).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from composer2_jax import chips, schema
from composer2_jax import sharding as shd
from composer2_jax.data import pipeline as data_lib
from composer2_jax.data import tokenizer as tk
from composer2_jax.data.tokenizer import TokenizerConfig
from composer2_jax.model import Transformer
from composer2_jax.model import context_parallel as cp
from composer2_jax.model.attention_memory import check_attention_memory
from composer2_jax.model.layer_plan import layer_plan
from composer2_jax.model.mtp import layout_context
from composer2_jax.model.pipeline import pipeline_spec
from composer2_jax.model_config import ModelConfig
from composer2_jax.model_config import preset as model_preset
from composer2_jax.params import count_params
from composer2_jax.sharding import activate
from composer2_jax.train import distributed
from composer2_jax.train import init_from as init_from_lib
from composer2_jax.train import optim as optim_lib
from composer2_jax.train.checkpoint import CheckpointConfig, Checkpointer
from composer2_jax.train.init_from import recorded_model  # noqa: F401  (re-exported)
from composer2_jax.train.metrics import (
    LogConfig,
    MetricWriter,
    Progress,
    byte_length_table,
    flops_per_token,
    mfu,
    with_bits_per_byte,
)
from composer2_jax.train.state import TrainState, abstract_train_state, init_train_state, train_state_from
from composer2_jax.train.step import StepConfig, batch_shardings, make_train_step

log = logging.getLogger(__name__)


class NonFiniteLoss(RuntimeError):
    """The loss or gradient norm became NaN/inf and the run is configured to stop."""


@dataclasses.dataclass
class RunResult:
    """What `train` returns: the per-step losses and where things were written."""

    losses: list[float]
    final_step: int
    workdir: str
    seconds: float
    tokens_per_s: float
    mfu: float
    model: ModelConfig | None = None  # the model config trained (inherited from init_from, see `inherited_model`)
    metrics: dict = dataclasses.field(default_factory=dict)  # the last logged step's scalar metrics
    # per step: Σ NLL / (ln 2 · UTF-8 bytes) of the loss-masked targets (train/metrics.with_bits_per_byte)
    bits_per_byte: list[float] = dataclasses.field(default_factory=list)


DATA_SHARD_BY = ("documents", "rows")


@dataclasses.dataclass(frozen=True)
class StageConfig:
    """One supervised training stage (cpt_bulk, cpt_long, sft): the schema of experiments/base.py's config."""

    preset: str = "toy"  # which architecture/run-size preset this config was built from
    model: ModelConfig = model_preset("toy")  # the architecture (composer2_jax/model_config.py documents each field)
    optim: optim_lib.OptimConfig = optim_lib.OptimConfig()  # optimizer and schedule (train/optim.py)
    step: StepConfig = StepConfig()  # loss weights, accumulation, NaN policy, the MTP loss (train/step.py)
    data: data_lib.DataConfig = data_lib.DataConfig()  # sources, packing, mixture, shuffling (data/pipeline.py)
    # multi-process data split: documents (scales) | rows (same batches at any host count)
    data_shard_by: str = "documents"
    # byte | kimi/tiktoken | hf | bpe | auto, and its file; a family with no path takes init_from's (its HF directory's
    # files, or the tokenizer the previous stage recorded: train/init_from.stage_tokenizer)
    tokenizer: TokenizerConfig = TokenizerConfig()
    mesh: shd.MeshConfig = shd.MeshConfig()  # device mesh axis sizes (sharding.py); -1 = the rest of the devices
    steps: int = 60  # train until this global step
    seed: int = 0  # parameter-init seed
    workdir: str = "runs/toy"  # checkpoints/ and logs/ go here; an existing checkpoint there is resumed
    # the weights to start from (fresh optimizer): a previous stage's checkpoints (or its workdir), a converted
    # checkpoint (`convert import`) or an HF model directory (config.json + safetensors); its own config.json or
    # recorded model gives the architecture (train/init_from.py)
    init_from: str = ""
    # tokens of context the stage's model must reach: RoPE's YaRN scaling is extended from the model's own (kept when it
    # already reaches this far); 0 = the model's rope settings as they are (train/init_from.extend_context)
    context_length: int = 0
    chip: str = ""  # accelerator name for MFU (chips.CHIPS: h200, h100, b200, v5p, v6e, cpu); empty = detect
    checkpoint: CheckpointConfig = CheckpointConfig()  # when and how checkpoints are saved (train/checkpoint.py)
    log: LogConfig = LogConfig()  # metrics cadence, TensorBoard/JSONL, progress bar (train/metrics.py)

    def __post_init__(self):
        if self.steps < 1:
            raise ValueError(f"steps={self.steps}; expected the global step to train until, >= 1")
        if self.data_shard_by not in DATA_SHARD_BY:
            raise ValueError(f"data_shard_by={self.data_shard_by!r}; expected one of {DATA_SHARD_BY}")
        if self.chip and self.chip not in chips.CHIPS:
            raise ValueError(f"chip={self.chip!r}; expected '' (detect) or one of {sorted(chips.CHIPS)}")
        if not self.workdir:
            raise ValueError("workdir is empty; expected a directory for checkpoints/ and logs/")
        check_attention_memory(self.model.attention_kernel, self.data.seq_len,
                               max(self.data.batch_size // self.step.grad_accum, 1), self.model.num_heads)
        if self.context_length < 0:
            raise ValueError(f"context_length={self.context_length}; expected a number of tokens >= 0 (0 = no "
                             f"extension)")


def stage_config(config) -> StageConfig:
    """The factory boundary of a training stage: its ConfigDict (or a StageConfig) → a frozen StageConfig."""
    return schema.from_config_dict(StageConfig, config)


def validate_layout(cfg, mesh, batch: int, seq_len: int, process_count: int):
    """Start-up checks: the batch and sequence split over the mesh; errors name both numbers."""
    pipe = pipeline_spec(cfg, mesh, layer_plan(cfg)[2])
    if pipe is not None:  # each microbatch is split over the batch axes inside a stage
        inner = shd.mesh_axes_of("activation_batch", shd.within_stage())
        n_inner = shd.axis_size(mesh, inner)
        if batch % (pipe.microbatches * n_inner):
            raise ValueError(f"global batch {batch} is not divisible by model.pipeline_microbatches="
                             f"{pipe.microbatches} × {'×'.join(inner)} = {pipe.microbatches * n_inner} (each pipeline "
                             f"microbatch is split over the batch axes)")
    batch_axes = shd.mesh_axes_of("activation_batch")
    shd_batch = shd.axis_size(mesh, batch_axes)
    if batch % shd_batch:
        raise ValueError(f"global batch {batch} is not divisible by {'×'.join(batch_axes)} = {shd_batch} (the mesh "
                         f"axes the batch is split over)")
    context = layout_context(cfg, mesh)
    if context > 1 and seq_len % (2 * context):
        raise ValueError(f"seq_len {seq_len} is not divisible by 2×context = {2 * context} "
                         f"(the zigzag layout cuts each row into 2·context chunks)")
    if batch % process_count:
        raise ValueError(f"global batch {batch} is not divisible by the process count {process_count}")


def _put_batch(batch: dict, shardings: dict, context: int = 1) -> dict:
    """Host batch (this process's rows) → global sharded arrays; zigzag token order when context > 1.

    Context parallelism cuts every row into 2·context chunks and gives device i chunks i and 2·context−1−i
    (causal load balance, model/context_parallel.py); tokens, targets, masks, segment ids and positions move
    together, so the loss (a sum over tokens) is unchanged.
    """
    if context > 1:
        batch = {k: np.asarray(v) for k, v in cp.zigzag_batch({k: batch[k] for k in shardings}, context).items()}
    if jax.process_count() == 1:
        return {k: jax.device_put(np.asarray(batch[k]), shardings[k]) for k in shardings}
    return {k: jax.make_array_from_process_local_data(shardings[k], np.asarray(batch[k])) for k in shardings}


def _data_iterator(run: StageConfig, tokenizer, state):
    """This process's rows of each global batch.

    `data.shard_by = "documents"` gives each process a disjoint slice of every source (scales to any host count);
    `"rows"` has every process build the whole global batch and keep its rows: more tokenizer work per host, but
    the global batch — and so the loss curve — is the same for any number of processes.
    """
    pid, n = jax.process_index(), jax.process_count()
    if run.data_shard_by == "documents" or n == 1:
        return data_lib.make_iterator(run.data, tokenizer, pid, n, state=state)
    return _RowSlice(data_lib.make_iterator(run.data, tokenizer, 0, 1, state=state), pid, n)


class _RowSlice:
    """An iterator over this process's rows of a global-batch iterator (state passes through)."""

    def __init__(self, it, pid: int, n: int):
        self.it, self.pid, self.n = it, pid, n

    def __next__(self):
        batch = next(self.it)
        rows = batch["tokens"].shape[0] // self.n
        return {k: v[self.pid * rows:(self.pid + 1) * rows] for k, v in batch.items()}

    def get_state(self):
        return self.it.get_state()


def inherited_model(preset: str, model: ModelConfig, init_from: str, *, grow_mtp: bool = False,
                    context_length: int = 0) -> ModelConfig:
    """The model a stage trains: its own section when it starts fresh; with `init_from` (a stage's checkpoints, a
    converted checkpoint or an HF directory) the checkpoint's model changed only where the stage explicitly departs
    from its preset, each change logged (train/init_from.stage_model). `grow_mtp` adds fresh MTP depths the
    checkpoint lacks (training stages; RL follows its warm start's depth); `context_length` extends RoPE from the
    checkpoint's own scaling."""
    return init_from_lib.stage_model(preset, model, init_from, grow_mtp=grow_mtp, context_length=context_length)


def load_stage_params(path: str, abstract: TrainState, model=None, seed: int = 0,
                      example_shape: tuple[int, int] = (1, 8)) -> tuple[Any, Any]:
    """Params and router biases of `path` (any init_from source) in the shardings of `abstract`; optimizer state is
    not carried. MTP depths the source lacks are initialised with `model` (train/init_from.load_params)."""
    return init_from_lib.load_params(path, abstract, model, seed, example_shape)


def train(config) -> RunResult:
    """Run (or resume) one training stage as configured (a ConfigDict or a StageConfig); returns the losses."""
    run = stage_config(config)
    run = dataclasses.replace(run, model=inherited_model(run.preset, run.model, run.init_from, grow_mtp=True,
                                                         context_length=run.context_length),
                              tokenizer=init_from_lib.stage_tokenizer(run.tokenizer, run.init_from,
                                                                        init_from_lib.preset_default_tokenizer(run.preset)))
    cfg, oc, sc, dc = run.model, run.optim, run.step, run.data
    workdir = Path(run.workdir)
    mesh = shd.make_mesh(run.mesh)
    validate_layout(cfg, mesh, dc.batch_size, dc.seq_len, jax.process_count())
    tokenizer = run.tokenizer.build()
    tk.check_vocab(tokenizer, cfg.vocab_size)

    model = Transformer(cfg, mesh)
    make_tx = lambda p, names: optim_lib.make_optimizer(oc, p, names, mesh)  # noqa: E731
    shape = (dc.batch_size, dc.seq_len)
    ckpt = Checkpointer(workdir / "checkpoints", run.checkpoint.keep, run.checkpoint.async_save)
    abstract, shardings, tx = abstract_train_state(model, make_tx, mesh, shape)
    data_state = None
    if ckpt.latest_step() is not None:  # resume this stage
        step0, state, data_state, _ = ckpt.restore(abstract, fallback=run.checkpoint.fallback)
        log.info("resumed from step %d", step0)
    elif run.init_from:  # the source's weights, a fresh optimizer: no init program to compile
        try:
            loaded = load_stage_params(run.init_from, abstract, model, run.seed, shape)
        except BaseException:
            ckpt.close()
            _remove_if_empty(workdir / "checkpoints", workdir)  # a failed start leaves nothing behind
            raise
        state = train_state_from(*loaded, tx, shardings, mesh)
    else:
        state, shardings, tx = init_train_state(model, make_tx, mesh, jax.random.key(run.seed), shape)
    it = _data_iterator(run, tokenizer, data_state)

    step_fn = make_train_step(model, tx, sc, optim_lib.schedule(oc), oc.qk_clip_tau)
    step_fn = jax.jit(with_bits_per_byte(step_fn, byte_length_table(tokenizer, cfg.vocab_size)), donate_argnums=0,
                      in_shardings=(shardings, batch_shardings(mesh)), out_shardings=(shardings, None))
    total, active = count_params(state.params, cfg)
    f_tok = flops_per_token(cfg, active, dc.seq_len)
    chip = chips.get_chip(run.chip or chips.detect_chip())
    writer = MetricWriter(workdir / "logs", enabled=jax.process_index() == 0 and run.log.write)
    writer.write(int(state.step), dict(params_total=total, params_active=active, flops_per_token=f_tok))
    start = int(state.step)
    bar = Progress(run.steps, start, enabled=run.log.progress and jax.process_index() == 0)
    curves, pending, t_start, tokens_seen, last = _Curves(), [], time.time(), 0.0, {}
    logs = _LogContext(writer, bar, curves, last, f_tok, chip, t_start, sc.skip_nonfinite)
    last_good = ckpt.latest_step()
    with activate(mesh):
        for step in range(start, run.steps):
            batch = _put_batch(next(it), batch_shardings(mesh), layout_context(cfg, mesh))
            if step == start:  # compile once, then meet the other processes before the step's first collective
                step_fn = step_fn.lower(state, batch).compile()
                distributed.barrier(f"train-step-compiled:{workdir}:{start}")
            state, metrics = step_fn(state, batch)
            pending.append((step, metrics))
            done = step + 1
            save = done % run.checkpoint.every == 0 or done == run.steps
            if save or done % run.log.every == 0:  # metrics are checked before any state is saved
                tokens_seen = _flush(pending, logs, tokens_seen, last_good)
                pending = []
            if save:
                ckpt.save(done, state, it.get_state(), config_record(run))
                last_good = done
    ckpt.close()
    writer.close()
    bar.close()
    secs = time.time() - t_start
    tps = tokens_seen / max(secs, 1e-9)
    return RunResult(curves.losses, int(state.step), str(workdir), secs, tps,
                     mfu(tps, f_tok, chip.peak_bf16_flops, jax.device_count()), cfg, last, curves.bits_per_byte)


def _remove_if_empty(*dirs: Path) -> None:
    """Remove each directory that is empty (in order: a child before its parent)."""
    for d in dirs:
        try:
            d.rmdir()
        except OSError:
            pass


def config_record(run) -> dict:
    """The JSON record of a run's frozen config saved with each checkpoint (objects that are not JSON: repr)."""
    return json.loads(json.dumps(schema.to_dict(run), default=repr))


@dataclasses.dataclass
class _Curves:
    """Per-step values a run returns."""

    losses: list[float] = dataclasses.field(default_factory=list)
    bits_per_byte: list[float] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class _LogContext:
    """Where `_flush` puts a run's metrics and what it needs to derive throughput: fixed for the run (the
    containers `curves` and `last` are filled in place)."""

    writer: MetricWriter  # metrics files (logs/)
    bar: Progress  # the console progress bar
    curves: _Curves  # per-step loss and bits/byte the run returns
    last: dict  # the newest step's scalars (cleared and refilled per step)
    flops_per_token: float  # model FLOPs per token, for MFU
    chip: chips.Chip  # its peak bf16 FLOP/s, for MFU
    t_start: float  # time.time() when the loop started
    skip_nonfinite: bool  # StepConfig.skip_nonfinite: warn and go on (else raise NonFiniteLoss)


def _flush(pending, logs: _LogContext, tokens_seen: float, last_good):
    """Fetch the pending steps' metrics, check them, write them (the newest scalars also into `logs.last`); returns
    the updated token count."""
    fetched = jax.device_get([m for _, m in pending])
    for (step, _), m in zip(pending, fetched):
        if not bool(m["finite"]):
            msg = (f"non-finite loss/grad at step {step + 1} (loss={float(m['loss'])}, grad_norm="
                   f"{float(m['grad_norm'])}); last good checkpoint: step {last_good}")
            if not logs.skip_nonfinite:
                raise NonFiniteLoss(msg)
            log.warning("%s — step skipped (state unchanged)", msg)
        tokens_seen += float(m["tokens"])
        logs.curves.losses.append(float(m["loss"]))
        logs.curves.bits_per_byte.append(float(m["bits_per_byte"]))
        tps = tokens_seen / max(time.time() - logs.t_start, 1e-9)
        scal = {k: v for k, v in m.items() if np.ndim(v) == 0}
        scal.update(tokens_per_s=tps, mfu=mfu(tps, logs.flops_per_token, logs.chip.peak_bf16_flops,
                                              jax.device_count()))
        logs.writer.write(step + 1, scal)
        logs.last.clear()
        logs.last.update({k: float(v) for k, v in scal.items()}, step=step + 1)
    logs.bar.update(len(pending), logs.curves.losses[-1], tokens_seen / max(time.time() - logs.t_start, 1e-9))
    return tokens_seen
