"""Training metrics: FLOPs per token and MFU, bits per byte, and the writers (TensorBoard events, JSONL, progress
bar)."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from composer2_jax.model_config import ModelConfig


@dataclasses.dataclass(frozen=True)
class LogConfig:
    """What a run logs and how often."""

    every: int = 10  # fetch and write metrics every N steps
    write: bool = True  # TensorBoard events + metrics.jsonl under workdir/logs
    progress: bool = True  # tqdm progress bar with tokens/s and ETA

    def __post_init__(self):
        if self.every < 1:
            raise ValueError(f"log.every={self.every}; expected >= 1")


def flops_per_token(cfg: ModelConfig, active_params: int, seq_len: int) -> float:
    """Training FLOPs per token: 6·N_active + causal attention.

    N_active excludes the embedding table (a lookup, no FLOPs) and includes the LM head. Attention per layer and
    token: forward q·kᵀ and p·v cost 2·H·(K + V) per visible key, a causal query sees T/2 keys on average, and the
    backward costs twice the forward: 3·H·(K + V)·T. (PaLM appendix B; MaxText counts the same way.)
    """
    n_matmul = active_params - cfg.vocab_size * cfg.hidden_size
    attn = 3 * cfg.num_layers * cfg.num_heads * (cfg.qk_head_dim + cfg.v_head_dim) * seq_len
    return 6.0 * n_matmul + attn


def mfu(tokens_per_s: float, flops_token: float, peak_flops: float, n_devices: int) -> float:
    """Model FLOPs utilisation: achieved model FLOP/s over the devices' peak."""
    return tokens_per_s * flops_token / (peak_flops * n_devices)


def byte_length_table(tokenizer, model_vocab_size: int) -> np.ndarray:
    """UTF-8 bytes per id (`Tokenizer.byte_lengths`: 0 for special ids) as float32 [model_vocab_size]; embedding rows
    past the tokenizer's ids count 0 bytes."""
    lengths = tokenizer.byte_lengths()
    if len(lengths) > model_vocab_size:
        raise ValueError(f"the tokenizer has {len(lengths)} ids but the model's vocab_size is {model_vocab_size}")
    table = np.zeros(model_vocab_size, np.float32)
    table[:len(lengths)] = lengths
    return table


def with_bits_per_byte(step: Callable, byte_lengths: np.ndarray) -> Callable:
    """`step(state, batch) -> (state, metrics)` with metrics `bytes` (UTF-8 bytes of the loss-masked targets) and
    `bits_per_byte` = Σ NLL (nats, over those targets) / (ln 2 · bytes), so runs with different tokenizers compare.

    The NLL sum is `ce · tokens` of the step's metrics. Special tokens (bos/eos, chat markers) count 0 bytes: they are
    markup, not text, while their NLL stays in the sum, and byte and BPE tokenizers put the same special tokens in the
    same places, so both pay for them alike.
    """
    import jax.numpy as jnp

    table = jnp.asarray(byte_lengths, jnp.float32)

    def wrapped(state, batch):
        state, metrics = step(state, batch)
        n_bytes = masked_bytes(batch["targets"], batch["loss_mask"], table)
        return state, dict(metrics, bytes=n_bytes, bits_per_byte=metrics["ce"] * metrics["tokens"] / (
            math.log(2) * jnp.maximum(n_bytes, 1.0)))

    return wrapped


def masked_bytes(targets, loss_mask, byte_lengths):
    """Σ over loss-masked targets of their UTF-8 byte lengths (a float32 scalar)."""
    import jax.numpy as jnp

    return jnp.sum(jnp.take(byte_lengths, targets, mode="clip") * loss_mask.astype(jnp.float32))


class MetricWriter:
    """Writes scalars to TensorBoard (tensorboardX) and a JSONL file; only process 0 writes."""

    def __init__(self, logdir: str | Path, enabled: bool = True):
        self.logdir = Path(logdir)
        self.enabled = enabled
        self._tb = None
        self._jsonl = None
        if enabled:
            from tensorboardX import SummaryWriter

            self.logdir.mkdir(parents=True, exist_ok=True)
            self._tb = SummaryWriter(str(self.logdir))
            self._jsonl = open(self.logdir / "metrics.jsonl", "a", buffering=1)

    def write(self, step: int, scalars: dict):
        """Log one step's scalars (non-scalars are skipped)."""
        if not self.enabled:
            return
        clean = {k: float(np.asarray(v)) for k, v in scalars.items() if np.ndim(v) == 0}
        for k, v in clean.items():
            self._tb.add_scalar(k, v, step)
        self._jsonl.write(json.dumps(dict(step=step, time=time.time(), **clean)) + "\n")

    def close(self):
        if self.enabled:
            self._tb.close()
            self._jsonl.close()


class Progress:
    """A tqdm progress bar showing loss, tokens/s and ETA (disabled when not a TTY unless forced)."""

    def __init__(self, total: int, initial: int = 0, enabled: Optional[bool] = None):
        from tqdm import tqdm

        self.bar = tqdm(total=total, initial=initial, unit="step", disable=enabled is False, dynamic_ncols=True,
                        mininterval=1.0)

    def update(self, n: int, loss: float, tokens_per_s: float):
        self.bar.set_postfix(loss=f"{loss:.4f}", tok_s=f"{tokens_per_s:,.0f}", refresh=False)
        self.bar.update(n)

    def close(self):
        self.bar.close()
