"""Stage 1 — continued pre-training on bulk code at 32k context, next-token loss + the MTP loss (depth from the preset).

Run:      python -m experiments.cpt_bulk                                   (toy preset, CPU, stdlib corpus)
          python -m experiments.cpt_bulk --config=experiments/cpt_bulk.py:gpu_small --config.steps=200
          python -m experiments.cpt_bulk --config=experiments/cpt_bulk.py:kimi_k2_5 --dry_run
                    (compile the planned config on its simulated chips, one JSON line: experiments/dry_run.py)
Hardware: toy — any 2-core CPU, about a minute; gpu_small — one H200; kimi_k2_5 — a pod (see docs/scaling.md).
Expected: toy byte-level loss falls from ln(512) ≈ 6.24 to below 3.5 in 60 steps.
"""

from __future__ import annotations

from experiments import base, plans
from experiments.main import run

MIXTURES = {"local": "experiments/mixtures/cpt_bulk_local.json", "bulk": "experiments/mixtures/cpt_bulk.json"}
LOCAL_PRESETS = (*base.CPU_PRESETS, "gpu_small")  # presets that train on the embedded corpus (nothing to download)


def get_config(preset: str = "toy"):
    """Bulk-code CPT: a code-dominated mixture, 32k sequences on real presets."""
    c = base.get_base_config(preset)
    c.workdir = f"runs/{preset}/cpt_bulk"
    # The data mixture is data (docs/data.md): the code-dominated bulk mix at scale, the embedded stdlib code corpus
    # on one machine (the same stream as before mixtures were files).
    c.data.mixture = MIXTURES["local" if preset in LOCAL_PRESETS else "bulk"]
    c.optim.name = "muon" if preset not in base.CPU_PRESETS else "adamw"
    c.optim.lr = 3e-3 if preset in base.CPU_PRESETS else 2e-4
    c.optim.warmup_steps = 10 if preset in base.CPU_PRESETS else 2000
    # MTP (model.num_mtp_layers from the preset; set it to 0 to train without): λ/D Σ_k (CE_k + w_sd·KL_k).
    # λ follows DeepSeek-V3: 0.3 for the first ~2/3 of the tokens (10T of 14.8T), then 0.1 — the heads learn
    # most while the trunk is still moving, and later weigh less on the trunk's gradient. Self-distillation from
    # the main head (w_sd) warms up over the first third: at the start the main head is near-uniform and would only
    # teach the heads its own ignorance; once it is informative, matching it (not the one-hot data label) is what
    # raises the drafts' acceptance α = 1 − TV(p_main, q_k) at decode time. cpt_long and sft keep λ at 0.1 and
    # distil at full weight from their first step (their main head is already a good teacher).
    c.step.mtp.update(weight=0.3, final_weight=0.1, switch_step=c.steps * 2 // 3, ramp_steps=c.steps // 10,
                      ce_weight=1.0, distill_weight=0.5, distill_warmup_steps=c.steps // 3)
    # real presets: the planned mesh, chip, kernels, remat, expert capacity and grad_accum (experiments/plans.py)
    return plans.apply_stage(c, preset, "cpt_bulk")


if __name__ == "__main__":
    run(__file__, "toy")
