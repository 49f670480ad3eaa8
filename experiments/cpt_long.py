"""Stage 2 — long-context CPT: 32k → 256k with YaRN and ring attention over the `context` mesh axis.

Run:      python -m experiments.cpt_long                        (toy: 4× longer rows than cpt_bulk, CPU)
          python -m experiments.cpt_long --config=experiments/cpt_long.py:kimi_k2_5 --config.init_from=CKPT
          python -m experiments.cpt_long --config=experiments/cpt_long.py:kimi_k2_5 --dry_run
                    (compile the planned config on its simulated chips, one JSON line: experiments/dry_run.py)
Hardware: toy — any CPU, under a minute; kimi_k2_5 — a pod with context parallelism (docs/scaling.md).
Expected: toy loss continues from the cpt_bulk level and keeps falling (start from its checkpoint via init_from).
YaRN: `context_length` extends the starting checkpoint's own RoPE scaling to the stage's rows (train/init_from.py
extend_context): kept when it already reaches that far (Kimi K2.5 ships factor 64 over 4,096 = 256k), otherwise
YaRN's factor is raised over the checkpoint's own original context.
With fake CPU devices: XLA_FLAGS=--xla_force_host_platform_device_count=8 python -m experiments.cpt_long \
    --config.mesh.fsdp=4 --config.mesh.context=2   (ring attention over 2 devices, zigzag rows)
"""

from __future__ import annotations

import dataclasses

from composer2_jax.model_config import preset as model_preset
from experiments import base, plans
from experiments.main import run

LONG = {"toy": 512, "small": 512, "gpu_small": 262144, "kimi_k2_5": 262144, "kimi_k2": 262144, "deepseek_v3": 262144}


def get_config(preset: str = "toy"):
    """Long-context CPT: longer packed rows, fewer of them, lower LR; starts from cpt_bulk's checkpoint."""
    # ring: context-parallel over mesh.context; one local block when it is 1
    c = base.get_base_config(preset, model=dataclasses.replace(model_preset(preset), attention_kernel="ring"),
                             context_length=LONG[preset])
    c.workdir = f"runs/{preset}/cpt_long"
    c.init_from = f"runs/{preset}/cpt_bulk/checkpoints"
    c.data.seq_len = LONG[preset]
    c.data.batch_size = max(c.data.batch_size // 4, 1) if preset in base.CPU_PRESETS else 64
    c.steps = 20 if preset in base.CPU_PRESETS else 5000
    c.optim.total_steps = c.steps
    c.optim.lr = 1e-3 if preset in base.CPU_PRESETS else 5e-5
    c.optim.warmup_steps = 2 if preset in base.CPU_PRESETS else 200
    c.step.mtp.update(weight=0.1, ce_weight=1.0, distill_weight=1.0)  # the MTP schedule: experiments/cpt_bulk.py
    # real presets: the planned mesh, chip, kernels, remat, expert capacity and grad_accum (experiments/plans.py)
    return plans.apply_stage(c, preset, "cpt_long")


if __name__ == "__main__":
    run(__file__, "toy")
