"""Inference: MLA latent KV cache (contiguous and paged), batched prefill/decode with per-token log-probs and routing,
MTP speculative decoding. Public API: the rollout engine `RolloutEngine`, `EngineConfig` (infer/rollout_engine.py:
sessions, continuous batching, paged cache, in-flight weight updates — what RL rollouts and the benchmark's model
agent use) and the static `Engine`, `SamplingParams`, `Completion` (infer/static_engine.py: one fixed batch generated to
completion, with MTP speculative decoding; the reference the rollout engine is tested against)."""

from composer2_jax.infer.rollout_engine import EngineConfig, RolloutEngine
from composer2_jax.infer.static_engine import Completion, Engine, SamplingParams

__all__ = ["Engine", "SamplingParams", "Completion", "RolloutEngine", "EngineConfig"]
