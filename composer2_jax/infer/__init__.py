"""Inference: MLA latent KV cache, batched prefill/decode with per-token log-probs and routing, MTP speculative
decoding. Public API: `Engine`, `SamplingParams`, `Completion` (infer/engine.py)."""

from composer2_jax.infer.engine import Completion, Engine, SamplingParams

__all__ = ["Engine", "SamplingParams", "Completion"]
