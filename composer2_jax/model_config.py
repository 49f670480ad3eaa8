"""Model configuration: the frozen `ModelConfig` (the architecture's one schema, a comment on every field) and the
named presets. The defaults are `kimi_k2_5`; every other preset is a set of differences from it.

Experiments edit the ConfigDict derived from it (`schema.to_config_dict`); `model_config(section)` is the one factory
boundary that turns that section back into a frozen `ModelConfig`. Modules never see the whole config. This module
imports neither ml_collections nor any data library: the model builds on a machine that has only JAX and Flax.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from composer2_jax import schema


def _require(ok: bool, msg: str):
    """ValueError(msg) unless ok."""
    if not ok:
        raise ValueError(msg)


@dataclasses.dataclass(frozen=True)
class RopeScaling:
    """DeepSeek-style YaRN parameters (`rope_scaling` of the HF config; type 'yarn')."""

    factor: float = 1.0  # context extension factor s
    original_max_position_embeddings: int = 4096  # pre-training context the frequencies were fit for
    beta_fast: float = 32.0  # rotations above which a frequency is kept (extrapolated)
    beta_slow: float = 1.0  # rotations below which a frequency is interpolated by 1/s
    mscale: float = 1.0  # attention temperature coefficient applied to cos/sin (relative to mscale_all_dim)
    mscale_all_dim: float = 0.0  # coefficient of the softmax-scale correction (0.1*m*ln(s)+1)^2

    def __post_init__(self):
        _require(self.factor >= 1.0, f"rope_scaling.factor must be >= 1, got {self.factor}")
        _require(self.original_max_position_embeddings > 0,
                 f"rope_scaling.original_max_position_embeddings must be > 0, got "
                 f"{self.original_max_position_embeddings}")


KIMI_K2_5_YARN = RopeScaling(factor=64.0, original_max_position_embeddings=4096, beta_fast=32.0, beta_slow=1.0,
                             mscale=1.0, mscale_all_dim=1.0)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Architecture of a DeepSeek-V3 / Kimi-K2 family decoder; the defaults are Kimi K2.5's, plus the one MTP depth
    continued pre-training adds (the released K2.5 weights carry none: imported, they have num_mtp_layers = 0)."""

    vocab_size: int = 163840  # tokenizer vocabulary (rows of the embedding and the LM head)
    hidden_size: int = 7168  # model width D
    num_layers: int = 61  # decoder layers (MTP layers not counted)
    num_heads: int = 64  # attention heads H
    q_lora_rank: Optional[int] = 1536  # rank of the low-rank query projection; None = a full D -> H*K projection
    kv_lora_rank: int = 512  # width of the compressed KV latent that MLA caches
    qk_nope_head_dim: int = 128  # per-head query/key width without position information
    qk_rope_head_dim: int = 64  # per-head rotary width; the rotary key is one head shared by all heads
    v_head_dim: int = 128  # per-head value width
    intermediate_size: int = 18432  # SwiGLU width of the dense (non-MoE) layers
    moe_intermediate_size: int = 2048  # SwiGLU width of each routed and shared expert
    n_routed_experts: int = 384  # routed experts E (0 = a dense model)
    n_shared_experts: int = 1  # always-on shared experts (their widths add up into one SwiGLU)
    num_experts_per_tok: int = 8  # experts each token is routed to (top-k)
    n_group: int = 1  # expert groups for group-limited routing
    topk_group: int = 1  # groups a token may route into
    norm_topk_prob: bool = True  # renormalise the top-k sigmoid scores to sum to 1
    routed_scaling_factor: float = 2.827  # multiplier on the routed experts' combined output
    first_k_dense_replace: int = 1  # the first k layers use the dense MLP
    moe_layer_freq: int = 1  # after the dense prefix, every n-th layer is MoE (DeepSeek rule i % n == 0)
    rms_norm_eps: float = 1e-5  # RMSNorm epsilon of the block norms
    rope_theta: float = 50000.0  # RoPE base
    rope_scaling: Optional[RopeScaling] = KIMI_K2_5_YARN  # YaRN (DeepSeek form); None = plain RoPE
    rope_interleave: bool = True  # rotary pairs interleaved (x0,x1),(x2,x3)... as in released DeepSeek/Kimi weights
    max_position_embeddings: int = 262144  # longest supported context
    # multi-token-prediction depth D (MTP modules after the trunk): DeepSeek-V3's 1 on the real presets, trained by
    # every CPT stage (train/step.py) and carried through init_from; 0 = no MTP modules
    num_mtp_layers: int = 1
    dtype: str = "bfloat16"  # activation/compute dtype (softmax, logits and losses are always fp32)
    param_dtype: str = "float32"  # parameter (master weight) dtype
    scan_layers: bool = True  # run the homogeneous MoE layers under nn.scan (one compiled layer)
    pipeline_microbatches: int = 0  # microbatches M per pipelined batch over the mesh's `stage` axis; 0: M = stages
    pipeline_repeats: int = 1  # virtual stages per device (circular schedule): the stack is cut into stage·repeats
    # Gather each stage's parameters over the FSDP axes (fsdp, context) once per step, before the schedule loop,
    # instead of inside it at every one of the M·R + S − 1 iterations (and again in the backward's recompute), and
    # (tensor = context = 1) reduce their gradients once after it (model/pipeline.py); the loop then reads weights
    # sharded only over `stage` (and `expert`/`tensor`, which stay). Costs the stage's parameters gathered in
    # the param dtype, per device: params / (stage·expert·tensor), plus a per-device gradient accumulator
    # in that layout through the backward loop. Off by default: the kimi_k2_5 plan on 256×H200 (stage=4, fsdp=8,
    # expert=8) would hold ≈ 1T / 32 parameters gathered per device, which does not fit in 141 GB next to the rest;
    # turn it on where the stage's gathered parameters fit (docs/scaling.md "Pipeline parallelism").
    pipeline_gather_params: bool = False
    # activation checkpointing per layer: none | full | dots | dots_no_batch | save_attention_out
    remat_policy: str = "full"
    attention_kernel: str = "xla"  # attention implementation by name (model/attention.py KERNELS)
    initializer_range: float = 0.02  # std of the normal initialiser of all matrices
    # token dispatch: dropless (every assignment computed) | capacity (GShard, drops overflow)
    moe_impl: str = "dropless"
    moe_capacity_factor: float = 1.25  # capacity mode: slots per expert C = ceil(factor · tokens·k / E) per group
    moe_expert_parallel: bool = True  # dispatch in shard_map over the `expert` axis when the caller gives a mesh
    moe_gmm_impl: str = "auto"  # grouped matmul: auto (per backend) | ragged (lax.ragged_dot) | padded (batched einsum)
    moe_dropless_slack: float = 2.0  # padded dropless: expert buffer = slack × mean load; heavier skew: exact slow path
    # split each MoE layer's tokens (per shard) into this many chunks, software-pipelined so one chunk's expert
    # all-to-all can overlap another chunk's expert FFN (model/moe.py `_routed_experts`); 1 = no chunking; must
    # divide the tokens each MoE shard holds. Capacity mode gives every chunk its own slots (docs/scaling.md "Overlap")
    moe_overlap_chunks: int = 1
    # FFN matmul precision: 'bf16' = the dense SwiGLU, shared and routed expert matmuls in model.dtype; 'fp8' = all
    # of them block-scaled FP8 e4m3 (DeepSeek-V3 recipe: 1×128 activation tiles, 128×128 weight blocks, fp32
    # accumulation, fp32 master weights; forward and backward GEMMs, model/fp8.py). Attention, router and LM head
    # stay in model.dtype. The planner costs these matmuls at the chip's FP8 peak (composer2_jax/chips.py)
    matmul_precision: str = "bf16"

    def __post_init__(self):
        _validate(self)

    @property
    def qk_head_dim(self) -> int:
        """Per-head query/key width: the no-position part plus the rotary part."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    def is_moe_layer(self, i: int) -> bool:
        """DeepSeek rule: layer i is MoE when i >= first_k_dense_replace and i % moe_layer_freq == 0."""
        return self.n_routed_experts > 0 and i >= self.first_k_dense_replace and i % self.moe_layer_freq == 0


_REMAT_POLICIES = ("none", "full", "dots", "dots_no_batch", "save_attention_out")
_DTYPES = ("float32", "bfloat16", "float16")
_MOE_IMPLS = ("dropless", "capacity")
_GMM_IMPLS = ("auto", "ragged", "padded")
_MATMUL_PRECISIONS = ("bf16", "fp8")  # model/fp8.py PRECISIONS


def _validate(c: ModelConfig):
    """Reject inconsistent architectures with a message naming the values."""
    for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "kv_lora_rank", "qk_nope_head_dim",
                 "qk_rope_head_dim", "v_head_dim", "intermediate_size", "moe_layer_freq"):
        v = getattr(c, name)
        _require(isinstance(v, int) and v > 0, f"model.{name} must be a positive int, got {v!r}")
    _require(c.q_lora_rank is None or c.q_lora_rank > 0, f"model.q_lora_rank must be None or > 0, got {c.q_lora_rank}")
    _require(c.hidden_size % c.num_heads == 0,
             f"model.hidden_size={c.hidden_size} is not divisible by model.num_heads={c.num_heads}")
    _require(c.qk_rope_head_dim % 2 == 0, f"model.qk_rope_head_dim must be even for RoPE, got {c.qk_rope_head_dim}")
    _require(0 <= c.first_k_dense_replace <= c.num_layers,
             f"model.first_k_dense_replace={c.first_k_dense_replace} must lie in [0, num_layers={c.num_layers}]")
    if c.n_routed_experts > 0:
        _require(c.moe_intermediate_size > 0, f"model.moe_intermediate_size must be > 0, got {c.moe_intermediate_size}")
        _require(0 < c.num_experts_per_tok <= c.n_routed_experts,
                 f"model.num_experts_per_tok={c.num_experts_per_tok} must lie in "
                 f"[1, n_routed_experts={c.n_routed_experts}]")
        _require(c.n_group >= 1 and c.n_routed_experts % c.n_group == 0,
                 f"model.n_routed_experts={c.n_routed_experts} is not divisible by model.n_group={c.n_group}")
        _require(1 <= c.topk_group <= c.n_group,
                 f"model.topk_group={c.topk_group} must lie in [1, n_group={c.n_group}]")
        per_group = c.n_routed_experts // c.n_group
        _require(c.n_group == 1 or per_group >= 2,
                 f"group-limited routing scores each group by its top-2 experts; "
                 f"n_routed_experts/n_group={per_group} < 2")
        _require(c.num_experts_per_tok <= c.topk_group * per_group,
                 f"model.num_experts_per_tok={c.num_experts_per_tok} exceeds the experts in topk_group={c.topk_group} "
                 f"groups of {per_group}")
    _require(isinstance(c.pipeline_microbatches, int) and c.pipeline_microbatches >= 0,
             f"model.pipeline_microbatches must be an int >= 0 (0 = as many as pipeline stages), got "
             f"{c.pipeline_microbatches!r}")
    _require(isinstance(c.pipeline_repeats, int) and c.pipeline_repeats >= 1,
             f"model.pipeline_repeats must be an int >= 1, got {c.pipeline_repeats!r}")
    _require(isinstance(c.pipeline_gather_params, bool),
             f"model.pipeline_gather_params must be a bool (True / False), got {c.pipeline_gather_params!r}")
    _require(c.remat_policy in _REMAT_POLICIES,
             f"model.remat_policy={c.remat_policy!r}; expected one of {_REMAT_POLICIES}")
    _require(c.dtype in _DTYPES and c.param_dtype in _DTYPES,
             f"model.dtype={c.dtype!r} / param_dtype={c.param_dtype!r}; expected one of {_DTYPES}")
    _require(c.num_mtp_layers >= 0, f"model.num_mtp_layers must be >= 0, got {c.num_mtp_layers}")
    _require(c.moe_impl in _MOE_IMPLS, f"model.moe_impl={c.moe_impl!r}; expected one of {_MOE_IMPLS}")
    _require(c.moe_gmm_impl in _GMM_IMPLS, f"model.moe_gmm_impl={c.moe_gmm_impl!r}; expected one of {_GMM_IMPLS}")
    _require(c.matmul_precision in _MATMUL_PRECISIONS,
             f"model.matmul_precision={c.matmul_precision!r}; expected one of {_MATMUL_PRECISIONS}")
    _require(c.moe_capacity_factor > 0, f"model.moe_capacity_factor must be > 0, got {c.moe_capacity_factor}")
    _require(c.moe_dropless_slack >= 1, f"model.moe_dropless_slack must be >= 1, got {c.moe_dropless_slack}")
    _require(isinstance(c.moe_overlap_chunks, int) and not isinstance(c.moe_overlap_chunks, bool)
             and c.moe_overlap_chunks >= 1,
             f"model.moe_overlap_chunks must be an int >= 1 (1 = no chunking), got {c.moe_overlap_chunks!r}")


def _preset_overrides(name: str) -> dict[str, Any]:
    """Differences of each named architecture from `kimi_k2_5`."""
    if name == "kimi_k2_5":
        return {}
    if name == "kimi_k2":  # Kimi-K2-Instruct-0711 as released (no MTP module)
        return dict(rms_norm_eps=1e-6, num_mtp_layers=0, max_position_embeddings=131072,
                    rope_scaling=RopeScaling(factor=32.0, original_max_position_embeddings=4096, beta_fast=1.0,
                                             beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0))
    if name == "deepseek_v3":
        return dict(vocab_size=129280, num_heads=128, n_routed_experts=256, n_group=8, topk_group=4,
                    routed_scaling_factor=2.5, first_k_dense_replace=3, rms_norm_eps=1e-6, rope_theta=10000.0,
                    max_position_embeddings=163840, num_mtp_layers=1,
                    rope_scaling=RopeScaling(factor=40.0, original_max_position_embeddings=4096, beta_fast=32.0,
                                             beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0))
    if name == "toy":  # the same family at CPU size: a train step in well under a second
        return dict(vocab_size=512, hidden_size=64, num_layers=3, num_heads=4, q_lora_rank=32, kv_lora_rank=32,
                    qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, intermediate_size=128,
                    moe_intermediate_size=32, n_routed_experts=8, num_experts_per_tok=2, n_group=2, topk_group=1,
                    routed_scaling_factor=2.5, max_position_embeddings=16384, dtype="float32",
                    remat_policy="none", num_mtp_layers=2,
                    rope_scaling=RopeScaling(factor=4.0, original_max_position_embeddings=256, beta_fast=32.0,
                                             beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0))
    if name == "small":  # the toy at 2x the width and 4 layers with a 2,048-id BPE: 2.8M parameters (1.7M active), the
        # size whose warm start solves the multi-turn `pkg` family on 2 cores (docs/rl.md, "A harder family: `pkg`")
        # Padded expert buffers: its SFT step of 12 × 704 tokens took 2.38 s against ragged_dot's 2.63 without MTP
        # depths, 3.77 against 4.83 with its two (2-core CPU, 2026-12-07, the same loss), so unlike the toy it does
        # not take the CPU's 'auto' (ragged).
        return dict(_preset_overrides("toy"), vocab_size=2048, hidden_size=128, num_layers=4, q_lora_rank=64,
                    kv_lora_rank=64, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32, intermediate_size=384,
                    moe_intermediate_size=96, moe_gmm_impl="padded")
    if name == "gpu_small":  # Kimi-shaped, sized to fit and fill one 141 GB H200 for MFU work (~6.7B total)
        return dict(vocab_size=163840, hidden_size=2048, num_layers=12, num_heads=16, q_lora_rank=768,
                    kv_lora_rank=512, intermediate_size=8192, moe_intermediate_size=1024, n_routed_experts=64,
                    num_experts_per_tok=8, max_position_embeddings=262144)
    # Stand-ins for published MaxText benchmarks, used to check the planner's roofline (docs/scaling.md): the same
    # width, depth, FFN, heads, head dims and vocabulary, with MLA (q_lora_rank None, kv_lora_rank 512) in place
    # of GQA — ±3 % of the parameters and equal attention FLOPs (q·k over 96 + 32 = 128 dims, v 128).
    mla_like = dict(vocab_size=32000, q_lora_rank=None, kv_lora_rank=512, qk_nope_head_dim=96, qk_rope_head_dim=32,
                    v_head_dim=128, rope_theta=10000.0, rope_scaling=None, max_position_embeddings=4096,
                    num_mtp_layers=0, rms_norm_eps=1e-5)
    if name == "llama2_70b_mla":  # Llama-2-70B shape, dense
        return dict(mla_like, hidden_size=8192, num_layers=80, num_heads=64, intermediate_size=28672,
                    n_routed_experts=0, n_shared_experts=0, first_k_dense_replace=0)  # all 80 layers scanned
    if name == "mixtral_8x7b_mla":  # Mixtral-8x7B shape: 8 experts top-2, no shared expert
        return dict(mla_like, hidden_size=4096, num_layers=32, num_heads=32, intermediate_size=14336,
                    moe_intermediate_size=14336, n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=0,
                    n_group=1, topk_group=1, routed_scaling_factor=1.0, first_k_dense_replace=0)
    raise ValueError(f"unknown model preset {name!r}; expected one of {PRESETS}")


PRESETS = ("kimi_k2_5", "kimi_k2", "deepseek_v3", "toy", "small", "gpu_small", "llama2_70b_mla", "mixtral_8x7b_mla")


def preset(name: str) -> ModelConfig:
    """The frozen ModelConfig of a named preset."""
    return dataclasses.replace(ModelConfig(), **_preset_overrides(name))


CPT_LONG_ORIGINAL_LEN = 32768  # stage-1 (cpt_bulk) sequence length the RoPE frequencies were trained at
CPT_LONG_TARGET_LEN = 262144  # stage-2 (cpt_long) sequence length: 256k with ring attention over `context`


def long_context_rope(m: ModelConfig, target_len: int = CPT_LONG_TARGET_LEN,
                      original_len: int = CPT_LONG_ORIGINAL_LEN) -> ModelConfig:
    """`m` with YaRN set to extend RoPE from `original_len` to `target_len` (cpt_long).

    factor s = target_len / original_len (32k → 256k: s = 8), original_max_position_embeddings = original_len;
    beta_fast/beta_slow/mscale/mscale_all_dim are kept from m's YaRN block (DeepSeek's 32/1/1/1 when m has none).
    s = 1 is plain RoPE. A model that already carries YaRN from a shorter L0 (the released Kimi K2.5: 4096 × 64)
    follows DeepSeek-V3's convention instead: pass original_len=L0, so that s = target_len / L0.
    """
    if target_len < original_len or original_len <= 0:
        raise ValueError(f"long_context_rope extends context: need 0 < original_len={original_len} <= "
                         f"target_len={target_len}")
    if target_len % original_len:
        raise ValueError(f"target_len={target_len} is not a multiple of original_len={original_len}")
    old = m.rope_scaling or RopeScaling(beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0)
    yarn = dataclasses.replace(old, factor=float(target_len // original_len),
                               original_max_position_embeddings=int(original_len))
    return dataclasses.replace(m, rope_scaling=yarn,
                               max_position_embeddings=max(int(target_len), int(m.max_position_embeddings)))


# How a stage computes rather than what its parameters are: a stage that starts from a checkpoint keeps its own
# values of these (ring attention in cpt_long need not follow into SFT); every other field is the architecture the
# checkpoint's parameters belong to and is inherited (`inherit_model`).
EXECUTION_FIELDS = ("attention_kernel", "remat_policy", "moe_impl", "moe_capacity_factor", "moe_expert_parallel",
                    "moe_gmm_impl", "moe_dropless_slack", "moe_overlap_chunks", "matmul_precision")


def inherit_model(recorded: ModelConfig, stage: ModelConfig, base: ModelConfig
                  ) -> tuple[ModelConfig, dict[str, tuple[Any, Any]]]:
    """The model of a stage that starts from a checkpoint: one model config per run, changed only explicitly.

    `recorded` is the architecture the checkpoint trained with, `stage` the stage's own model section and `base`
    the preset that section was derived from. The result is `recorded` with (a) every architecture field in which
    the stage's section explicitly departs from its preset (an edited rope_scaling, a stage that sets num_mtp_layers=0
    to drop the MTP modules) and (b) the stage's own EXECUTION_FIELDS. Returns (model, {field: (from, to)}) of
    every change from `recorded`, for the log.
    """
    explicit = {f.name: getattr(stage, f.name) for f in dataclasses.fields(ModelConfig)
                if f.name in EXECUTION_FIELDS or getattr(stage, f.name) != getattr(base, f.name)}
    changes = {k: (getattr(recorded, k), v) for k, v in explicit.items() if getattr(recorded, k) != v}
    return dataclasses.replace(recorded, **explicit), changes


def model_config(m: Any, **overrides) -> ModelConfig:
    """The factory boundary: a model config section (ConfigDict, dict or ModelConfig) → a frozen, validated
    ModelConfig; unknown keys are ConfigErrors naming the key and the closest known ones."""
    cfg = schema.from_config_dict(ModelConfig, m, "model")
    if overrides:
        bad = sorted(set(overrides) - {f.name for f in dataclasses.fields(ModelConfig)})
        if bad:
            raise schema.ConfigError(schema.unknown_key_message(bad[0], "model",
                                                                [f.name for f in dataclasses.fields(ModelConfig)]))
        if isinstance(overrides.get("rope_scaling"), dict):
            overrides["rope_scaling"] = schema.from_config_dict(RopeScaling, overrides["rope_scaling"],
                                                                "model.rope_scaling")
        cfg = dataclasses.replace(cfg, **overrides)
    return cfg


def get_model_config(name: str, **overrides) -> ModelConfig:
    """Shortcut: the frozen ModelConfig of a preset, with field overrides."""
    return model_config(preset(name), **overrides)
