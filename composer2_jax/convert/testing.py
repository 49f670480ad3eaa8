"""Tiny HF reference models for conversion and parity tests (needs torch + transformers: requirements-dev.txt).

`random_hf_model` builds transformers' DeepseekV3ForCausalLM (fp32, eager attention) with weights that make every
code path matter: unit-variance projections (logits of order 1, not the 0.02-init near-zeros), norm scales
around 1, and a nonzero random router bias e_score_correction_bias that changes which experts win.
"""

from __future__ import annotations

import math
from typing import Any

# Two tiny architectures the parity tests run (HF DeepseekV3Config kwargs).
DEEPSEEK_LIKE: dict[str, Any] = dict(  # group-limited routing, full-rank queries, 2 dense layers, YaRN, half-split RoPE
    vocab_size=96, hidden_size=64, intermediate_size=96, moe_intermediate_size=24, num_hidden_layers=4,
    num_attention_heads=4, num_key_value_heads=4, n_routed_experts=8, n_shared_experts=2, num_experts_per_tok=3,
    n_group=4, topk_group=2, first_k_dense_replace=2, q_lora_rank=None, kv_lora_rank=32, qk_nope_head_dim=16,
    qk_rope_head_dim=8, v_head_dim=16, routed_scaling_factor=2.5, norm_topk_prob=False, rms_norm_eps=1e-6,
    max_position_embeddings=256, rope_interleave=False, num_mtp_layers=0, tie_word_embeddings=False,
    rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=64,
                         beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=0.707))
KIMI_LIKE: dict[str, Any] = dict(  # one group, low-rank queries, 1 dense layer, YaRN, interleaved RoPE
    vocab_size=320, hidden_size=64, intermediate_size=128, moe_intermediate_size=16, num_hidden_layers=3,
    num_attention_heads=4, num_key_value_heads=4, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2,
    n_group=1, topk_group=1, first_k_dense_replace=1, q_lora_rank=24, kv_lora_rank=32, qk_nope_head_dim=16,
    qk_rope_head_dim=8, v_head_dim=16, routed_scaling_factor=2.827, norm_topk_prob=True, rms_norm_eps=1e-5,
    max_position_embeddings=512, rope_interleave=True, num_mtp_layers=0, tie_word_embeddings=False,
    rope_parameters=dict(rope_type="yarn", rope_theta=50000.0, factor=8.0, original_max_position_embeddings=64,
                         beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0))


def random_hf_model(spec: dict, seed: int = 0):
    """A DeepseekV3ForCausalLM (fp32, eager attention) with non-trivial random weights."""
    import torch
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    torch.manual_seed(seed)
    cfg = DeepseekV3Config(**spec)
    cfg._attn_implementation = "eager"
    model = DeepseekV3ForCausalLM(cfg).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g))
            elif name.endswith("embed_tokens.weight"):
                p.copy_(torch.randn(p.shape, generator=g))
            else:  # [.., out, in]: unit gain
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1]))
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.3 * (torch.rand(b.shape, generator=g) - 0.5))
    return model


def hf_logits(model, tokens) -> "Any":
    """fp32 logits [B, T, V] of an HF model for int tokens [B, T] (numpy)."""
    import torch

    with torch.no_grad():
        return model(input_ids=torch.as_tensor(tokens, dtype=torch.long)).logits.float().numpy()
