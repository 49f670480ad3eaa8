"""Stage 1 — continued pre-training on bulk code at 32k context, next-token loss (+ MTP when enabled).

Run:      python -m experiments.cpt_bulk                                   (toy preset, CPU, stdlib corpus)
          python -m experiments.cpt_bulk --config=experiments/cpt_bulk.py:gpu_small --config.steps=200
Hardware: toy — any 2-core CPU, about a minute; gpu_small — one H200; kimi_k2_5 — a pod (see docs/scaling.md).
Expected: toy byte-level loss falls from ln(512) ≈ 6.24 to below 3.5 in 60 steps.
"""

from __future__ import annotations

from experiments import base
from experiments.main import run


def get_config(preset: str = "toy"):
    """Bulk-code CPT: a code-dominated mixture, 32k sequences on real presets."""
    c = base.get_base_config(preset)
    c.workdir = f"runs/{preset}/cpt_bulk"
    c.optim.name = "muon" if preset != "toy" else "adamw"
    c.optim.lr = 3e-3 if preset == "toy" else 2e-4
    c.optim.warmup_steps = 10 if preset == "toy" else 2000
    return c


if __name__ == "__main__":
    run(__file__, "toy")
