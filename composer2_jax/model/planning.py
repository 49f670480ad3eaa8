"""Planning mode: what `composer2_jax.plan` switches on while it compiles a train step on host CPU devices.

The CPU compile stands in for an accelerator's, so two things that only matter there are changed at trace time:

  accelerator_kernels()  `block_kernel='auto'` (the ring's per-block kernel) resolves to the query-chunked XLA
                         kernel instead of the plain one: no [T/n, T/n] logits of a whole block, as with a fused
                         (cuDNN / splash) kernel on the accelerator — so the compiled memory is not that of a
                         naive stand-in.
  counting_loops()       loops that XLA's cost analysis counts once whatever their trip count (the query chunks of
                         chunked attention and of the chunked block kernel, the chunked cross-entropy and MTP loss)
                         are taken in one piece, so FLOPs and collectives are counted in full: the chunks of a
                         loop cost the same, so one piece of all of them is the same arithmetic. (Unrolling them
                         instead gave the same counts but made a kimi_k2_5 cost compile trace 64 attention chunks
                         per layer, forward, recompute and backward.) HBM bytes differ slightly: one piece reads
                         each K/V block once, n chunks read it n times. Only for cost compiles: the one-piece
                         buffers are larger, and nothing is allocated.

Both are context managers over context variables read while tracing; outside the planner both are off.
"""

from __future__ import annotations

import contextlib
import contextvars

_ACCEL = contextvars.ContextVar("composer2_accelerator_kernels", default=False)
_COUNT = contextvars.ContextVar("composer2_counting_loops", default=False)


@contextlib.contextmanager
def _set(var: contextvars.ContextVar):
    token = var.set(True)
    try:
        yield
    finally:
        var.reset(token)


def accelerator_kernels():
    """Trace with accelerator-like kernels (see the module docstring)."""
    return _set(_ACCEL)


def counting_loops():
    """Trace with cost-counted loops unrolled (see the module docstring)."""
    return _set(_COUNT)


def use_accelerator_kernels() -> bool:
    return _ACCEL.get()


def count_loops() -> bool:
    return _COUNT.get()
