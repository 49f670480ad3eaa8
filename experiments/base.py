"""The base experiment config every training stage derives from (one level deep).

The schema is `train/loop.StageConfig` (a frozen dataclass, a comment on every field); this file only picks the
per-preset run sizes and derives the ml_collections ConfigDict that experiment files edit and `--config.key=value`
flags override. `python -m experiments.cpt_bulk --describe` prints every key with its value and comment.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys

from composer2_jax import schema
from composer2_jax.data.pipeline import DataConfig
from composer2_jax.data.tokenizer import TokenizerConfig, preset_tokenizer
from composer2_jax.model_config import preset as model_preset
from composer2_jax.sharding import MeshConfig
from composer2_jax.train.loop import StageConfig
from composer2_jax.train.optim import OptimConfig

# Presets sized for a 2-core CPU: their stages take the toy's CPU settings (local corpus, AdamW, short runs).
CPU_PRESETS = ("toy", "small")
# Presets whose tokenizer is trained here (data/bpe.py on the stdlib) rather than shipped with a checkpoint: where
# it lives by default. An experiment trains it there on first use (`ensure_tokenizer`); a path given by flag is never
# trained over.
TRAINED_TOKENIZERS = {"small": "runs/small/tokenizer"}
# Per-preset run sizes: (batch, seq_len, steps, mesh, attention kernel). toy runs on a 2-core CPU in about a minute.
# The real presets' stages replace mesh and kernel by their planned ones (experiments/plans.py); the base kernel is
# memory-safe already, since the dense 'xla' kernel is refused at T >= 8192 (model/attention_memory.py).
RUN_SIZES = {
    "toy": dict(batch=8, seq_len=128, steps=60, mesh=dict(fsdp=-1), kernel="xla"),
    "small": dict(batch=8, seq_len=128, steps=60, mesh=dict(fsdp=-1), kernel="xla"),
    "gpu_small": dict(batch=8, seq_len=8192, steps=1000, mesh=dict(fsdp=-1), kernel="xla_causal_skip"),
    "kimi_k2_5": dict(batch=2048, seq_len=32768, steps=100000, mesh=dict(data=1, fsdp=32, expert=8),
                      kernel="xla_causal_skip"),
    "kimi_k2": dict(batch=2048, seq_len=32768, steps=100000, mesh=dict(data=1, fsdp=32, expert=8),
                    kernel="xla_causal_skip"),
    "deepseek_v3": dict(batch=2048, seq_len=32768, steps=100000, mesh=dict(data=1, fsdp=32, expert=8),
                        kernel="xla_causal_skip"),
}


def base_stage(preset: str = "toy") -> StageConfig:
    """The frozen base config of a preset: its architecture and run size, every other field at its default."""
    if preset not in RUN_SIZES:
        raise ValueError(f"unknown preset {preset!r}; expected one of {sorted(RUN_SIZES)}")
    size = RUN_SIZES[preset]
    model = dataclasses.replace(model_preset(preset), attention_kernel=size["kernel"])
    tokenizer = preset_tokenizer(preset, TRAINED_TOKENIZERS.get(preset, ""))
    return StageConfig(preset=preset, model=model, tokenizer=tokenizer,
                       optim=OptimConfig(total_steps=size["steps"]),
                       data=DataConfig(batch_size=size["batch"], seq_len=size["seq_len"]),
                       mesh=MeshConfig(**size["mesh"]), steps=size["steps"], workdir=f"runs/{preset}")


def get_base_config(preset: str = "toy", **overrides):
    """The ConfigDict of `base_stage(preset)` (with top-level field overrides) that experiment files edit."""
    return schema.to_config_dict(dataclasses.replace(base_stage(preset), **overrides))


def ensure_tokenizer(tokenizer: TokenizerConfig, preset: str) -> None:
    """Train the preset's own BPE (`python -m composer2_jax.data.bpe --preset PRESET`, the stdlib corpus) at its
    default path (`TRAINED_TOKENIZERS`) if the config names that path and nothing is there yet; any other config is
    left to the loader (a missing path named by flag is an error there, never trained over)."""
    default = TRAINED_TOKENIZERS.get(preset)
    if tokenizer.name != "bpe" or not default or tokenizer.path != default:
        return
    if os.path.exists(os.path.join(default, "tokenizer.json")):
        return
    from composer2_jax.data import bpe

    print(f"training the {preset!r} preset's BPE tokenizer into {default} (once; about 20 s)", file=sys.stderr)
    partial = f"{default}.partial-{os.getpid()}"
    bpe.main(["--out", partial, "--preset", preset])
    os.makedirs(os.path.dirname(default) or ".", exist_ok=True)
    try:
        os.rename(partial, default)  # whole or not at all: a concurrent experiment may have won the race
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
        if not os.path.exists(os.path.join(default, "tokenizer.json")):
            raise
