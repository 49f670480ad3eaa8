"""Which attention kernels are memory-safe at long sequences, and the error for a dense kernel where it is not.

A dense kernel (`xla`, and the all-gather context-parallel kernels, which run it on the gathered keys) materialises
fp32 logits [B, H, T, S] per layer; the memory-safe kernels keep O(T) memory per query block: `xla_chunked`
(query chunks under remat), `xla_causal_skip` (the visible causal blocks only, model/causal_attention.py), `ring`
and `ring_latent` (blocks rotated over `context`; with context = 1 one fused cuDNN / splash block on an
accelerator, the query-chunked XLA block elsewhere: model/kernels.py). At T >= DENSE_MAX_T a dense kernel is an
error raised when the config is built (train/loop.StageConfig, rl/config.RLExperimentConfig) and when the model
traces its attention (model/attention.py), naming the bytes the logits would need. Imports no jax.
"""

from __future__ import annotations

DENSE_KERNELS = ("xla", "allgather_cp", "allgather_cp_latent")  # fp32 [B, H, T, S] logits per layer
MEMORY_SAFE_KERNELS = ("xla_causal_skip", "xla_chunked", "ring", "ring_latent")  # O(T) memory per query block
DENSE_MAX_T = 8192  # T from which a dense kernel is refused


def dense_logits_bytes(batch: int, heads: int, seq_len: int) -> int:
    """Bytes of one layer's fp32 [B, H, T, T] attention logits."""
    return 4 * batch * heads * seq_len * seq_len


def check_attention_memory(kernel: str, seq_len: int, batch: int, heads: int, where: str = "model.attention_kernel"):
    """ValueError when `kernel` is dense and `seq_len` >= DENSE_MAX_T: names the kernel, T, the logits' bytes and
    the memory-safe kernels to choose instead. Anything else (a memory-safe or an unknown kernel, short T) passes:
    unknown names are rejected where the kernel is looked up (attention.get_kernel)."""
    if kernel not in DENSE_KERNELS or seq_len < DENSE_MAX_T:
        return
    need = dense_logits_bytes(batch, heads, seq_len)
    raise ValueError(
        f"{where}={kernel!r} is the dense attention kernel: at T = {seq_len} its fp32 [B, H, T, T] logits need "
        f"4 × {batch} × {heads} × {seq_len} × {seq_len} = {need:,} bytes ({need / 2**30:,.1f} GiB) per layer "
        f"(B = {batch} sequences per compiled step, H = {heads} heads); a dense kernel is refused at "
        f"T >= {DENSE_MAX_T}. Choose a memory-safe kernel (O(T) memory per query block): "
        f"{', '.join(MEMORY_SAFE_KERNELS)} (docs/scaling.md, \"Shipped configurations\")")
