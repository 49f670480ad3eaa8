"""Parameter-tree utilities: counting total and per-token active parameters."""

from __future__ import annotations

import jax

from composer2_jax.model_config import ModelConfig

ROUTED_EXPERT_WEIGHTS = ("wi_gate", "wi_up", "wo")


def _is_routed_expert(path) -> bool:
    """A routed-expert weight: `.../moe/{wi_gate,wi_up,wo}` (not the shared expert's)."""
    keys = [getattr(k, "key", getattr(k, "name", None)) for k in path]
    return len(keys) >= 2 and keys[-2] == "moe" and keys[-1] in ROUTED_EXPERT_WEIGHTS


def count_params(params, cfg: ModelConfig) -> tuple[int, int]:
    """(total, active per token): active drops the routed experts a token does not select (E − k of E).

    Embedding and LM head count fully in both, as in the DeepSeek-V3 and Kimi K2 reports.
    """
    total = routed = 0
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        total += leaf.size
        if _is_routed_expert(path):
            routed += leaf.size
    e, k = cfg.n_routed_experts, cfg.num_experts_per_tok
    inactive = routed * (e - k) // e if e else 0
    return total, total - inactive
