"""The published step times the roofline is checked against (`--validate`) and the two calibration factors
measured on them: how far the CPU compile overestimates memory, and what fraction of the optimistic bound a
MaxText-class stack reaches."""

from __future__ import annotations

import dataclasses

# The CPU compile's peak bytes over what the hardware needed, for the published runs of `REFERENCES` (`--validate`;
# the planned peaks against the 32 GB v6e MaxText ran both in, measured figures: docs/scaling.md, "How far to trust
# the numbers"): the smaller of the two runs' factors. Main causes seen in the compiled HLO: XLA:CPU normalises bf16
# arithmetic to f32 and keeps f32 copies (e.g. of the scan's saved residual stack) that an accelerator does not, and
# MaxText's tuned remat. `fits_calibrated` divides by the smaller factor: an upper bound on the accelerator's need if
# the factor carries.
CPU_MEMORY_OVERESTIMATE = 2.0
# The same runs' fraction of the roofline's optimistic bound max(FLOPs / peak, comm) reached, i.e. of the compiled
# FLOP rate at peak (`--validate`; measured figures: docs/scaling.md, "How far to trust the numbers"). The calibrated
# estimate divides the bound by the two runs' mean, as "what a MaxText-class stack reaches on this program".
REFERENCE_EFFICIENCY = 0.566


@dataclasses.dataclass(frozen=True)
class Reference:
    """A published step time the roofline is checked against (`--validate`)."""

    name: str
    preset: str  # a preset this project builds with the same shape (config.py: the *_mla stand-ins)
    chip: str
    mesh: str
    global_batch: int  # sequences per step
    seq_len: int
    step_s: float  # measured seconds per step
    mfu: float  # as published
    source: str


# MaxText on one v6e-256 slice, bf16, FSDP over the slice (tpu-recipes, training/trillium/*-MaxText/README.md:
# "completed step: …, seconds: …" with libtpu 20241028; MFU from MaxText docs/reference/models/tiering.md).
REFERENCES = (
    Reference("Llama-2-70B, v6e-256, SL 4096", "llama2_70b_mla", "v6e", "data=1,fsdp=256", 1024, 4096, 17.373,
              0.438, "tpu-recipes Llama2-70B-MaxText: 17.373 s/step, 943 tok/s/device, 4,194,304 tokens/step"),
    Reference("Mixtral-8x7B (dropping), v6e-256, SL 4096", "mixtral_8x7b_mla", "v6e", "data=1,fsdp=256", 2048, 4096,
              8.409, 0.3523, "tpu-recipes Mixtral-8x7B-MaxText: 8.409 s/step, 3,897 tok/s/device, 8,388,608 "
                              "tokens/step"),
)

