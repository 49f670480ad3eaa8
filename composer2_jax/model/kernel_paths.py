"""The one record of which kernel every fallback-capable choice took, and the strict mode that forbids fallbacks.

Sites (each a choice that could change implementation without the caller asking):
  block_fwd, block_bwd   the ring's block kernel (kernels.py): 'cudnn', 'xla', 'xla_chunked', 'splash'; fallbacks
                         'xla' (cuDNN or splash cannot run here: backend, dtype, head dim; or the chunked kernel's T
                         is not a multiple of CHUNK), 'cudnn_public_api' (jax's private cuDNN module moved: the LSE
                         comes back in bf16), 'cudnn_low_precision_lse' (cuDNN's stats not fp32), 'xla_recompute'
                         (the fused cuDNN backward was refused at trace time)
  attention              the model's attention kernel (attention.py): 'xla', 'xla_chunked', 'xla_causal_skip'
                         (causal_attention.py); fallback 'xla' (T not a multiple of the chunk: full [T, S] logits),
                         'xla_chunked' (causal block skipping refused: not causal, explicit positions such as a
                         zigzag layout, T ≠ S, or T not a multiple of the chunk)
  grouped_matmul         expert matmuls (grouped_matmul.py): 'ragged', 'padded' (C ≥ rows, or strict mode), or
                         'padded+ragged_on_overflow' (a `lax.cond` takes ragged_dot when an expert outgrows its C
                         slots); each run of that ragged branch is a runtime fallback, counted by a host callback

A choice made while tracing is recorded when the program is traced (a cached jit records nothing new). Strict mode —
`COMPOSER2_STRICT_KERNELS=1` in the environment, or `set_strict(True)` (the benchmarks' default) — turns every
fallback into a `KernelFallbackError` naming the site, the path and the reason; under it a padded grouped matmul
compiles no ragged branch at all and a host check raises at run time if an expert overflows.
"""

from __future__ import annotations

import os
import threading
from typing import Optional

import jax

ENV_STRICT = "COMPOSER2_STRICT_KERNELS"

_LOCK = threading.Lock()
_PATHS: dict[str, set[str]] = {}  # site -> paths taken (trace time)
_FALLBACKS: dict[str, set[str]] = {}  # site -> "path: reason" of each fallback taken (trace time)
_RUNTIME: dict[str, int] = {}  # site -> times a runtime fallback branch executed
_STRICT: Optional[bool] = None  # None: read the environment


class KernelFallbackError(RuntimeError):
    """A kernel fell back to another implementation while strict mode was on."""


def is_strict() -> bool:
    """Strict mode: `set_strict`'s value if set, else COMPOSER2_STRICT_KERNELS=1 in the environment."""
    if _STRICT is not None:
        return _STRICT
    return os.environ.get(ENV_STRICT, "0").strip().lower() in ("1", "true", "yes", "on")


def set_strict(flag: Optional[bool]):
    """Force strict mode on or off for this process (None: follow the environment again)."""
    global _STRICT
    _STRICT = flag


def record(site: str, path: str):
    """Note the path a site took by choice (no fallback)."""
    with _LOCK:
        _PATHS.setdefault(site, set()).add(path)


def fallback(site: str, path: str, reason: str):
    """Note a fallback to `path` at `site`; in strict mode raise KernelFallbackError instead."""
    if is_strict():
        raise KernelFallbackError(f"{site}: fell back to {path!r} ({reason}); strict kernels are on "
                                  f"({ENV_STRICT}=1 or set_strict(True)): fix the cause or turn strict mode off")
    with _LOCK:
        _PATHS.setdefault(site, set()).add(path)
        _FALLBACKS.setdefault(site, set()).add(f"{path}: {reason}")


def _count_runtime(site: str):
    with _LOCK:
        _RUNTIME[site] = _RUNTIME.get(site, 0) + 1


def runtime_fallback(site: str):
    """Inside a traced fallback branch: count each execution of it on the host (see `snapshot`)."""
    jax.debug.callback(lambda: _count_runtime(site))


def _raise_if_over(site: str, largest, limit: int, what: str):
    if int(largest) > limit:
        raise KernelFallbackError(f"{site}: {what} {int(largest)} > {limit}; strict kernels are on ({ENV_STRICT}=1 "
                                  f"or set_strict(True)), so the exact fallback path was not compiled")


def runtime_check(site: str, largest, limit: int, what: str):
    """Strict mode, traced: raise on the host (surfacing at the next block_until_ready) when largest > limit."""
    jax.debug.callback(lambda x: _raise_if_over(site, x, limit, what), largest)


def snapshot() -> dict:
    """What was taken so far in this process: {paths: {site: [..]}, fallbacks: {site: [..]}, runtime_fallbacks,
    strict}. Benchmarks print it on every JSON line."""
    jax.effects_barrier()  # runtime counters from callbacks still in flight
    with _LOCK:
        return dict(paths={k: sorted(v) for k, v in sorted(_PATHS.items())},
                    fallbacks={k: sorted(v) for k, v in sorted(_FALLBACKS.items())},
                    runtime_fallbacks=dict(sorted(_RUNTIME.items())), strict=is_strict())


def drain() -> dict:
    """`snapshot()`, then `reset()`: what the work since the previous drain took (one benchmark line's paths)."""
    out = snapshot()
    reset()
    return out


def reset():
    """Forget everything recorded (tests; one benchmark stage per process needs no reset)."""
    with _LOCK:
        _PATHS.clear()
        _FALLBACKS.clear()
        _RUNTIME.clear()
