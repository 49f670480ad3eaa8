"""Accelerator facts in one place: peak dense bf16 (and FP8) FLOP/s, HBM capacity and bandwidth, interconnect bandwidth.

Sources: vendor datasheets (NVIDIA H100/H200/B200 SXM; Google Cloud TPU v5p/v6e system architecture pages). FP8
peaks are the datasheets' dense FP8 Tensor Core figures (the sparsity figures halved: H100/H200 SXM 3,958 → 1,979
TFLOP/s, B200 9 → 4.5 PFLOP/s); the TPUs list none (no FP8 matmul in their system architecture pages).
`measured_*` are this project's own figures (measured figures: docs/design.md, "Facts measured on one H200").
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Chip:
    """One accelerator's ceilings (per chip)."""

    name: str
    peak_bf16_flops: float  # dense, no sparsity
    hbm_bytes: float
    hbm_bw: float  # bytes/s
    ici_bw: float  # bytes/s per chip, intra-node / intra-slice (NVLink or ICI), one direction
    dcn_bw: float  # bytes/s per chip across nodes / slices
    node_size: int = 8  # devices sharing the fast (ICI / NVLink) domain; collectives beyond it use DCN
    measured_matmul_flops: float | None = None
    peak_fp8_flops: float | None = None  # dense FP8 (e4m3) matmul peak; None: the chip has no FP8 matmul


CHIPS = {
    "h100": Chip("h100", 989e12, 80e9, 3.35e12, 450e9, 50e9, peak_fp8_flops=1979e12),
    "h200": Chip("h200", 989e12, 141e9, 4.8e12, 450e9, 50e9, measured_matmul_flops=782e12, peak_fp8_flops=1979e12),
    "b200": Chip("b200", 2250e12, 192e9, 8.0e12, 900e9, 50e9, peak_fp8_flops=4500e12),
    "v5p": Chip("v5p", 459e12, 95e9, 2.765e12, 600e9, 25e9, node_size=8960),  # a pod slice is one ICI domain
    "v6e": Chip("v6e", 918e12, 32e9, 1.64e12, 400e9, 25e9, node_size=256),
    "cpu": Chip("cpu", 1e12, 24e9, 20e9, 10e9, 1e9),  # a nominal figure so CPU runs print a (meaningless) MFU
}


def get_chip(name: str) -> Chip:
    """The Chip named `name`."""
    if name not in CHIPS:
        raise ValueError(f"unknown chip {name!r}; expected one of {sorted(CHIPS)}")
    return CHIPS[name]


def matmul_peak(chip: Chip, precision: str) -> float:
    """Peak FLOP/s of a matmul in `precision` ('bf16' or 'fp8', model.matmul_precision) on `chip`; a ValueError
    naming the chip when it has no FP8 peak."""
    if precision == "bf16":
        return chip.peak_bf16_flops
    if precision != "fp8":
        raise ValueError(f"matmul precision {precision!r}; expected 'bf16' or 'fp8'")
    if chip.peak_fp8_flops is None:
        have = sorted(n for n, c in CHIPS.items() if c.peak_fp8_flops)
        raise ValueError(f"chip {chip.name!r} has no FP8 matmul peak; model.matmul_precision='fp8' plans on {have}")
    return chip.peak_fp8_flops


def detect_chip() -> str:
    """Best guess of the local accelerator's name from jax.devices()."""
    import jax

    kind = jax.devices()[0].device_kind.lower()
    for name in ("h200", "h100", "b200", "v5p", "v6e"):
        if name in kind.replace(" ", ""):
            return name
    return "cpu" if jax.default_backend() == "cpu" else "h100"
