"""HF config.json ⇄ our model config, for DeepSeek-V3 (`deepseek_v3`), Kimi K2 (`kimi_k2`) and Kimi K2.5 (`kimi_k25`,
a multimodal wrapper whose decoder lives in `text_config`).

Every key of the (text) config is in exactly one of four tables, and anything else is an error that names the key:
  MAPPED        become our model fields (`num_hidden_layers` → `num_layers`, ...);
  ROPE_KEYS     `rope_theta`, `rope_scaling` (released files: type 'yarn', factor, ...), `rope_parameters`
                (transformers 5: the same with `rope_type` and `rope_theta` inside);
  CHECKED       architecture switches we implement one value of (hidden_act 'silu', scoring_func 'sigmoid', ...):
                another value is an error naming the key, the value and what we support;
  IGNORED       known to be irrelevant to the architecture (token ids, dtype, auto_map, generation defaults,
                training-only loss weights, parallelism hints; `quantization_config` is read by the importer).
`rope_interleave` defaults to True (released DeepSeek/Kimi weights), `moe_layer_freq` to 1, MTP depth to 0.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Mapping, Optional

from composer2_jax.model_config import ModelConfig, RopeScaling, model_config

# HF key → our key. Keys with a default may be absent from config.json.
MAPPED: dict[str, str] = {
    "vocab_size": "vocab_size",
    "hidden_size": "hidden_size",
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "q_lora_rank": "q_lora_rank",
    "kv_lora_rank": "kv_lora_rank",
    "qk_nope_head_dim": "qk_nope_head_dim",
    "qk_rope_head_dim": "qk_rope_head_dim",
    "v_head_dim": "v_head_dim",
    "intermediate_size": "intermediate_size",
    "moe_intermediate_size": "moe_intermediate_size",
    "n_routed_experts": "n_routed_experts",
    "n_shared_experts": "n_shared_experts",
    "num_experts_per_tok": "num_experts_per_tok",
    "n_group": "n_group",
    "topk_group": "topk_group",
    "norm_topk_prob": "norm_topk_prob",
    "routed_scaling_factor": "routed_scaling_factor",
    "first_k_dense_replace": "first_k_dense_replace",
    "moe_layer_freq": "moe_layer_freq",
    "rms_norm_eps": "rms_norm_eps",
    "rope_interleave": "rope_interleave",
    "max_position_embeddings": "max_position_embeddings",
    "num_nextn_predict_layers": "num_mtp_layers",
    "num_mtp_layers": "num_mtp_layers",  # transformers 5 attribute name of the same field
    "initializer_range": "initializer_range",
}
DEFAULTS: dict[str, Any] = {"rope_interleave": True, "moe_layer_freq": 1, "num_nextn_predict_layers": 0,
                            "initializer_range": 0.02, "n_group": 1, "topk_group": 1}
ROPE_KEYS = ("rope_theta", "rope_scaling", "rope_parameters")
# Keys allowed inside rope_scaling / rope_parameters besides the RopeScaling fields.
_ROPE_EXTRA = ("type", "rope_type", "rope_theta", "truncate", "attention_factor")

# Architecture switches with the one value we implement (None = key present with null, also accepted where listed).
CHECKED: dict[str, tuple] = {
    "model_type": ("deepseek_v3", "kimi_k2"),
    "hidden_act": ("silu",),
    "scoring_func": ("sigmoid",),
    "topk_method": ("noaux_tc",),
    "attention_bias": (False,),
    "attention_dropout": (0.0, 0, None),
    "tie_word_embeddings": (False,),
    "mlp_bias": (False,),
}

# Known-irrelevant keys: token ids, storage dtype, remote-code hooks, generation/bookkeeping defaults that
# transformers serialises, training-only loss weights (aux_loss_alpha, seq_aux) and parallelism hints.
IGNORED = frozenset({
    "architectures", "auto_map", "torch_dtype", "dtype", "transformers_version", "_name_or_path",
    "_attn_implementation", "_attn_implementation_autoset", "_commit_hash", "bos_token_id", "eos_token_id",
    "pad_token_id", "sep_token_id", "decoder_start_token_id", "use_cache", "quantization_config",
    "output_router_logits", "router_aux_loss_coef", "aux_loss_alpha", "seq_aux", "ep_size", "pretraining_tp",
    "output_attentions", "output_hidden_states", "return_dict", "torchscript", "use_bfloat16", "tf_legacy_loss",
    "pruned_heads", "chunk_size_feed_forward", "is_encoder_decoder", "is_decoder", "add_cross_attention",
    "cross_attention_hidden_size", "tie_encoder_decoder", "id2label", "label2id", "problem_type",
    "finetuning_task", "tokenizer_class", "prefix", "task_specific_params", "max_length", "min_length",
    "do_sample", "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty", "temperature", "top_k",
    "top_p", "typical_p", "repetition_penalty", "length_penalty", "no_repeat_ngram_size",
    "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences", "output_scores",
    "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values",
    "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens",
})
# Derived keys transformers writes; each must agree with the mapped fields (checked in `_check_derived`).
DERIVED = ("num_key_value_heads", "head_dim", "qk_head_dim")

# Keys of the kimi_k25 multimodal wrapper around `text_config` (the vision tower is not imported).
WRAPPER_KEYS = frozenset({
    "model_type", "text_config", "vision_config", "architectures", "auto_map", "torch_dtype", "dtype",
    "transformers_version", "_name_or_path", "quantization_config", "bos_token_id", "eos_token_id", "pad_token_id",
    "media_placeholder_token_id", "use_unified_vision_chunk", "video_placeholder", "ignore_index",
    "tie_word_embeddings", "use_cache", "_attn_implementation",
})
WRAPPER_TYPES = ("kimi_k25",)

# ModelConfig fields that a config.json determines (the rest are training/runtime choices).
ARCH_FIELDS = tuple(f.name for f in dataclasses.fields(ModelConfig)
                    if f.name in set(MAPPED.values()) - {"initializer_range"} | {"rope_theta", "rope_scaling"})


def load_json(path_or_dict) -> dict:
    """A config dict from a dict, a config.json path, or a checkpoint directory holding config.json."""
    if isinstance(path_or_dict, Mapping):
        return dict(path_or_dict)
    path = os.fspath(path_or_dict)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    with open(path) as f:
        return json.load(f)


def text_config(d: Mapping) -> dict:
    """The decoder's config: `text_config` of a kimi_k25 wrapper (wrapper keys checked), else d itself."""
    if d.get("model_type") in WRAPPER_TYPES or "text_config" in d:
        unknown = sorted(set(d) - WRAPPER_KEYS)
        if unknown:
            raise ValueError(f"config.json ({d.get('model_type')} wrapper) has unknown key(s) {unknown}; "
                             f"expected a subset of {sorted(WRAPPER_KEYS)}")
        if d.get("tie_word_embeddings", False):
            raise ValueError("config.json: tie_word_embeddings=True is not supported (the LM head is untied)")
        if not isinstance(d.get("text_config"), Mapping):
            raise ValueError(f"config.json of model_type {d.get('model_type')!r} lacks a text_config dict")
        return dict(d["text_config"])
    return dict(d)


def quantization_config(d: Mapping) -> Optional[dict]:
    """The quantization_config of the checkpoint (top level or inside text_config), or None."""
    q = d.get("quantization_config")
    if q is None and isinstance(d.get("text_config"), Mapping):
        q = d["text_config"].get("quantization_config")
    return None if q is None else dict(q)


def _rope(t: Mapping) -> tuple[float, Optional[dict]]:
    """(rope_theta, our rope_scaling dict or None) from rope_scaling / rope_parameters."""
    rp, rs = t.get("rope_parameters"), t.get("rope_scaling")
    if rp is not None and rs is not None and {k: v for k, v in rp.items() if k != "rope_theta"} != \
            {k: v for k, v in rs.items() if k != "rope_theta"}:
        raise ValueError(f"config.json: rope_parameters {rp} and rope_scaling {rs} disagree")
    params = dict(rp if rp is not None else (rs or {}))
    theta = t.get("rope_theta")
    if "rope_theta" in params:
        if theta is not None and float(theta) != float(params["rope_theta"]):
            raise ValueError(f"config.json: rope_theta={theta} and "
                             f"rope_parameters.rope_theta={params['rope_theta']} disagree")
        theta = params["rope_theta"]
    if theta is None:
        raise ValueError("config.json lacks rope_theta (top level or in rope_parameters)")
    kind = params.get("rope_type", params.get("type", "default"))
    fields = [f.name for f in dataclasses.fields(RopeScaling)]
    unknown = sorted(set(params) - set(fields) - set(_ROPE_EXTRA))
    if unknown:
        raise ValueError(f"config.json rope settings have unknown key(s) {unknown}; "
                         f"expected {fields + list(_ROPE_EXTRA)}")
    if kind in (None, "default"):
        return float(theta), None
    if kind != "yarn":
        raise ValueError(f"config.json: rope type {kind!r} is not supported; expected 'yarn' or 'default'")
    if params.get("truncate", True) is not True:
        raise ValueError("config.json: rope truncate=False is not supported (DeepSeek YaRN truncates the ramp)")
    if params.get("attention_factor") is not None:
        raise ValueError("config.json: an explicit rope attention_factor is not supported; set mscale/mscale_all_dim")
    orig = params.get("original_max_position_embeddings", t.get("max_position_embeddings"))
    factor = params.get("factor")
    if factor is None:  # transformers: factor = max_position_embeddings / original_max_position_embeddings
        factor = t["max_position_embeddings"] / orig
    return float(theta), dict(
        factor=float(factor), original_max_position_embeddings=int(orig),
        beta_fast=float(params.get("beta_fast") or 32.0), beta_slow=float(params.get("beta_slow") or 1.0),
        # An absent mscale behaves like HF's None: attention factor = mscale(s) (our rule: mscale falsy).
        mscale=float(params.get("mscale") or 0.0), mscale_all_dim=float(params.get("mscale_all_dim") or 0.0))


def _check_derived(t: Mapping, m: Mapping):
    expect = {"num_key_value_heads": m["num_heads"], "head_dim": m["qk_rope_head_dim"],
              "qk_head_dim": m["qk_nope_head_dim"] + m["qk_rope_head_dim"]}
    for k in DERIVED:
        if t.get(k) is not None and t[k] != expect[k]:
            raise ValueError(f"config.json: {k}={t[k]} is not supported; this architecture needs {k}={expect[k]}")


def read_hf_config(path_or_dict, **overrides) -> ModelConfig:
    """Our ModelConfig: the training fields of the defaults (or `overrides`) + the architecture read from the HF
    config.json."""
    t = text_config(load_json(path_or_dict))
    known = set(MAPPED) | set(ROPE_KEYS) | set(CHECKED) | IGNORED | set(DERIVED)
    unknown = sorted(set(t) - known)
    if unknown:
        raise ValueError(f"config.json has unknown key(s) {unknown}: not mapped, checked or known to be irrelevant. "
                         f"Mapped: {sorted(MAPPED)}; rope: {list(ROPE_KEYS)}; checked: {sorted(CHECKED)}; "
                         f"derived: {list(DERIVED)}; ignored: see composer2_jax/convert/hf_config.py IGNORED")
    for k, allowed in CHECKED.items():
        if k in t and t[k] not in allowed:
            raise ValueError(f"config.json: {k}={t[k]!r} is not supported; expected one of {list(allowed)}")
    m: dict[str, Any] = {}
    for hf_key, ours in MAPPED.items():
        if hf_key in t:
            v = t[hf_key]
            if hf_key in DEFAULTS and v is None:
                v = DEFAULTS[hf_key]
            if ours in m and m[ours] != v:
                raise ValueError(f"config.json: {hf_key}={v} disagrees with another key for {ours}={m[ours]}")
            m[ours] = v
    for hf_key, v in DEFAULTS.items():
        m.setdefault(MAPPED[hf_key], v)
    missing = sorted(k for k, ours in MAPPED.items() if ours not in m and k != "num_mtp_layers")
    if missing:
        raise ValueError(f"config.json lacks required key(s) {missing}")
    if m.get("n_routed_experts") is None:
        m["n_routed_experts"] = 0
    m["rope_theta"], m["rope_scaling"] = _rope(t)
    _check_derived(t, m)
    for k in ("vocab_size", "hidden_size", "num_layers", "num_heads", "kv_lora_rank", "qk_nope_head_dim",
              "qk_rope_head_dim", "v_head_dim", "intermediate_size", "moe_intermediate_size", "n_routed_experts",
              "n_shared_experts", "num_experts_per_tok", "n_group", "topk_group", "first_k_dense_replace",
              "moe_layer_freq", "max_position_embeddings", "num_mtp_layers"):
        m[k] = int(m[k])
    for k in ("routed_scaling_factor", "rms_norm_eps", "initializer_range"):
        m[k] = float(m[k])
    m["norm_topk_prob"], m["rope_interleave"] = bool(m["norm_topk_prob"]), bool(m["rope_interleave"])
    return model_config(ModelConfig(), **{**m, **overrides})


def hf_model_config(path_or_dict, **overrides) -> ModelConfig:
    """The frozen ModelConfig of an HF config.json (training fields from the base config unless overridden)."""
    return model_config(read_hf_config(path_or_dict), **overrides)


_TORCH_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


def to_hf_config(cfg: ModelConfig, extra: Optional[Mapping] = None) -> dict:
    """An HF config.json dict (DeepseekV3ForCausalLM, released `rope_scaling` form) for a ModelConfig.

    `extra` adds keys from the IGNORED table (e.g. bos/eos token ids carried over from the source).
    """
    inv = {ours: hf for hf, ours in MAPPED.items() if hf != "num_mtp_layers"}
    d: dict[str, Any] = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"}
    for ours, hf in inv.items():
        d[hf] = getattr(cfg, ours)
    d.update(num_key_value_heads=cfg.num_heads, hidden_act="silu", scoring_func="sigmoid", topk_method="noaux_tc",
             attention_bias=False, attention_dropout=0.0, tie_word_embeddings=False, rope_theta=cfg.rope_theta,
             torch_dtype=_TORCH_DTYPES[cfg.param_dtype])
    s = cfg.rope_scaling
    d["rope_scaling"] = None if s is None else dict(dataclasses.asdict(s), type="yarn")
    for k, v in (extra or {}).items():
        if k not in IGNORED:
            raise ValueError(f"to_hf_config: extra key {k!r} is not in the IGNORED table; "
                             "architecture keys come from cfg")
        d[k] = v
    return dict(sorted(d.items()))


def write_hf_config(cfg: ModelConfig, directory: str, extra: Optional[Mapping] = None) -> str:
    """Write config.json for cfg into directory; returns its path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "config.json")
    with open(path, "w") as f:
        json.dump(to_hf_config(cfg, extra), f, indent=2)
        f.write("\n")
    return path


def arch_dict(cfg: ModelConfig) -> dict:
    """The architecture fields of a ModelConfig (what a config.json determines)."""
    d = {k: getattr(cfg, k) for k in ARCH_FIELDS}
    d["rope_scaling"] = None if cfg.rope_scaling is None else dataclasses.asdict(cfg.rope_scaling)
    return d

