"""What every benchmark line shares: the kernel paths it took, and strict kernels on by default.

`emit(**record)` prints one JSON line with `kernel_paths` = what the work since the previous line took
(composer2_jax/model/kernel_paths.py: paths per site, fallbacks with their reasons, runtime fallback counts, strict).
`add_strict_flag(parser)` adds `--strict/--no-strict` (default on: a fallback is an error naming its reason, so a
figure can never be an XLA number labelled cuDNN); `apply_strict(args)` sets it for the process.
"""

from __future__ import annotations

import argparse
import json

from composer2_jax.model import kernel_paths


def emit(**record):
    """Print one JSON line, with the kernel paths the work since the previous line took."""
    print(json.dumps(dict(record, kernel_paths=kernel_paths.drain())), flush=True)


def add_strict_flag(ap: argparse.ArgumentParser):
    """--strict / --no-strict (default: strict)."""
    ap.add_argument("--strict", action=argparse.BooleanOptionalAction, default=True,
                    help="strict kernels: any kernel fallback is an error naming its reason (default on; "
                         f"{kernel_paths.ENV_STRICT}=1 does the same outside the benchmarks)")


def apply_strict(args: argparse.Namespace):
    """Set strict kernels for this process from the parsed flag."""
    kernel_paths.set_strict(bool(args.strict))
