"""Stage 3 — SFT on agentic coding transcripts (system, user, assistant with tool calls, tool outputs);
loss only on assistant tokens; packed like CPT.

Run:      python -m experiments.sft                             (toy: stdlib tool-use transcripts, CPU)
          python -m experiments.sft --config.data.sources='[{"kind": "chat_jsonl", "path": "my_chats.jsonl"}]'
          python -m experiments.sft --config=experiments/sft.py:kimi_k2_5 --dry_run --dry_run_depth=extrapolate
                    (compile the planned config on its simulated chips, one JSON line: experiments/dry_run.py)
Hardware: toy — any CPU, under a minute; real presets — the cpt_long mesh.
Expected: toy assistant-token loss falls well below the CPT loss (the transcripts are templated).
"""

from __future__ import annotations

from pathlib import Path

from composer2_jax.data.synthetic import write_stdlib_chats
from experiments import base, plans
from experiments.main import run


def get_config(preset: str = "toy"):
    """SFT: chat transcripts (default: generated from the stdlib at start-up), starting from cpt_long."""
    c = base.get_base_config(preset)
    c.workdir = f"runs/{preset}/sft"
    c.init_from = f"runs/{preset}/cpt_long/checkpoints"
    c.data.sources = [dict(kind="chat_jsonl", path=f"runs/{preset}/sft_data/stdlib_chats.jsonl", weight=1.0)]
    c.data.seq_len = 512 if preset in base.CPU_PRESETS else 32768
    c.data.batch_size = 4 if preset in base.CPU_PRESETS else 256
    c.steps = 30 if preset in base.CPU_PRESETS else 2000
    c.optim.total_steps = c.steps
    c.optim.lr = 1e-3 if preset in base.CPU_PRESETS else 2e-5
    c.optim.warmup_steps = 3 if preset in base.CPU_PRESETS else 100
    # MTP (schedule: experiments/cpt_bulk.py): the heads follow the trunk onto chat transcripts, distilled at full
    # weight — the drafts are judged against the policy's own distribution, which SFT is moving.
    c.step.mtp.update(weight=0.1, ce_weight=1.0, distill_weight=1.0)
    # real presets: the planned mesh, chip, kernels, remat, expert capacity and grad_accum (experiments/plans.py)
    return plans.apply_stage(c, preset, "sft")


def prepare(config):
    """Generate the embedded stdlib tool-use transcripts if a configured chat file is missing."""
    for src in config.data.sources:
        if (src["kind"] == "chat_jsonl" and src["path"].endswith("stdlib_chats.jsonl")
                and not Path(src["path"]).exists()):
            write_stdlib_chats(src["path"], n=2000)


if __name__ == "__main__":
    run(__file__, "toy", prepare)
