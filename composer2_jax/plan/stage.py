"""What a stage plans with: its sequence length, attention kernel and batch (`STAGES`), its model config for the
planner, and how it executes (`Execution`: remat policy, expert capacity factor, causal block skipping). Imports
no jax: the CLI reads these before it sets the simulated device count."""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

from composer2_jax.model_config import get_model_config

STAGES = {  # stage -> (sequence length, attention kernel, global batch in sequences per data-parallel shard)
    "cpt_bulk": (32768, "xla", 1),
    "cpt_long": (262144, "ring", 1),
    "sft": (32768, "xla", 1),
    "rl": (65536, "xla", 1),
}


def _stage_config(preset: str, stage: str, attention_kernel: Optional[str] = None, moe_impl: str = "capacity"):
    """(the preset's config with the stage's accelerator-like kernels and `moe_impl`, the stage's length)."""
    seq, kernel, _ = STAGES[stage]
    kernel = attention_kernel or kernel
    over = {"attention_kernel": "xla_chunked" if kernel == "xla" else kernel, "moe_gmm_impl": "padded",
            "moe_impl": moe_impl}
    return get_model_config(preset, **over), seq


EXECUTION_REMATS = ("full", "save_attention_out", "dots_no_batch", "dots", "none")  # model/block.py's policies
EXECUTION_CAPACITIES = (1.0, 1.25)  # capacity-mode expert buffers: C = ceil(factor · tokens·k / E) per group


@dataclasses.dataclass(frozen=True)
class Execution:
    """One point of the execution search: how a fixed model on a fixed mesh executes its step."""

    remat_policy: str  # activation checkpointing per layer (ModelConfig.remat_policy)
    capacity_factor: float  # expert buffer slots per mean load (ModelConfig.moe_capacity_factor)
    causal_skip: bool  # attention visits only the causally visible blocks ('xla_causal_skip' for 'xla_chunked')

    def apply(self, cfg):
        """`cfg` executing this way (causal skipping only replaces the chunked XLA kernel: never the ring)."""
        kernel = cfg.attention_kernel
        if kernel in ("xla_chunked", "xla_causal_skip"):
            kernel = "xla_causal_skip" if self.causal_skip else "xla_chunked"
        return dataclasses.replace(cfg, remat_policy=self.remat_policy, moe_capacity_factor=self.capacity_factor,
                                   attention_kernel=kernel)


def parse_execution(text: str) -> Execution:
    """`remat,capacity,skip` (e.g. `save_attention_out,1.0,1`) → Execution."""
    parts = text.split(",")
    if len(parts) != 3 or parts[2] not in ("0", "1"):
        raise ValueError(f"execution {text!r} is not remat,capacity,skip; expected e.g. save_attention_out,1.0,1")
    return Execution(parts[0], float(parts[1]), parts[2] == "1")


def _mesh_devices(text: str) -> int:
    """Devices of a `data=..,fsdp=..` mesh string, without importing jax."""
    return math.prod(int(p.split("=")[1]) for p in text.split(",") if "=" in p)
