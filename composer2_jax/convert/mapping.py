"""Which HF tensor becomes which leaf of our parameter tree, group by group.

A *group* is the unit of streaming: `globals` (embedding, final norm, LM head), `layers_{i}` (an unrolled prefix or
suffix layer), `unit_{u}` (`moe_layer_freq` consecutive layers: one step of the scanned stack) and `mtp_{m}`.
Each group lists `Leaf`s; a leaf knows its HF name, its HF shape and how its values map to ours:

  vector    norms and the router bias: same shape, copied
  embed     model.embed_tokens.weight [V, D]: copied
  linear    HF nn.Linear weight [out, in] → ours = W.T.reshape(shape) with the first `in_ndim` axes as `in`
            (q_proj [D,H,K] ← [H·K, D]; kv_b_proj [L,H,N+V] ← [H·(N+V), L]; o_proj [H,V,D] ← [D, H·V])
  experts   per-expert Linear weights `{hf}.{j}.{proj}.weight` [out, in] stacked into [E, in, out], or the
            transformers-5 fused form `{hf}.gate_up_proj` [E, 2F, D] (gate rows first) / `{hf}.down_proj` [E, D, F]

MTP layers (HF model.layers.{num_layers + m}) map into `mtp_{m}` with these names (the MTP module matches them):
  enorm.scale [D]        ← enorm.weight              (RMSNorm of the next token's embedding)
  hnorm.scale [D]        ← hnorm.weight              (RMSNorm of the previous depth's hidden state)
  eh_proj [2D, D]        ← eh_proj.weight [D, 2D]    (input is concat[enorm(emb); hnorm(h)], DeepSeek-V3 order)
  block.*                ← the decoder layer (self_attn.*, mlp.*, input/post_attention_layernorm): same leaf
                           names as `layers_{i}`; its router bias goes to router_state mtp.mtp_{m}.block.moe.*
  final_norm.scale [D]   ← shared_head.norm.weight   (norm before the shared LM head)
  embedding [V, D], head [D, V]  ← embed_tokens.weight, shared_head.head.weight, ONLY when they differ from the
                           main model's; equal copies (the DeepSeek-V3 release) are dropped and re-written on export.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

from composer2_jax.model.layer_plan import layer_name, layer_plan, unit_layer_name
from composer2_jax.model_config import ModelConfig

PROJ_IN_OUT = {"gate_proj": ("wi_gate", False), "up_proj": ("wi_up", False), "down_proj": ("wo", True)}


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One leaf of a group's tree and its HF source."""

    path: tuple[str, ...]  # path inside the group's collection tree
    hf: str  # HF name: full tensor name (vector/embed), module name without `.weight` (linear), experts prefix
    shape: tuple[int, ...]  # our shape
    kind: str  # vector | embed | linear | experts
    in_ndim: int = 1  # linear/experts: leading axes of `shape` (after E) that form the HF input dim
    proj: str = ""  # experts: gate_proj | up_proj | down_proj
    collection: str = "params"  # params | router_state
    force_fp32: bool = False  # the router and its bias are kept in fp32 whatever the import dtype

    @property
    def hf_shape(self) -> tuple[int, ...]:
        """HF tensor shape ([out, in] for Linear weights, per expert for experts)."""
        if self.kind in ("vector", "embed"):
            return self.shape
        s = self.shape[1:] if self.kind == "experts" else self.shape
        return (math.prod(s[self.in_ndim:]), math.prod(s[:self.in_ndim]))

    def expert_name(self, j: int) -> str:
        return f"{self.hf}.{j}.{self.proj}.weight"


@dataclasses.dataclass(frozen=True)
class Group:
    """A streaming unit: its name, where it sits in the model tree, and its leaves."""

    name: str
    kind: str  # globals | layer | unit | mtp
    index: int  # layer id (layer), unit id (unit), depth (mtp); -1 for globals
    leaves: tuple[Leaf, ...]
    optional: tuple[Leaf, ...] = ()  # mtp: embedding/head copies, present only if the checkpoint has them


def _prefix(path: tuple[str, ...], leaves: list[Leaf]) -> list[Leaf]:
    return [dataclasses.replace(l, path=path + l.path) for l in leaves]


def layer_leaves(cfg: ModelConfig, hf: str, moe: bool) -> list[Leaf]:
    """Leaves of one decoder layer whose HF module prefix is `hf` (e.g. 'model.layers.3')."""
    c, d, h = cfg, cfg.hidden_size, cfg.num_heads
    a = f"{hf}.self_attn"
    out = [Leaf(("attn_norm", "scale"), f"{hf}.input_layernorm.weight", (d,), "vector"),
           Leaf(("ffn_norm", "scale"), f"{hf}.post_attention_layernorm.weight", (d,), "vector")]
    if c.q_lora_rank is None:
        out.append(Leaf(("attn", "q_proj"), f"{a}.q_proj", (d, h, c.qk_head_dim), "linear"))
    else:
        out += [Leaf(("attn", "q_a_proj"), f"{a}.q_a_proj", (d, c.q_lora_rank), "linear"),
                Leaf(("attn", "q_a_norm", "scale"), f"{a}.q_a_layernorm.weight", (c.q_lora_rank,), "vector"),
                Leaf(("attn", "q_b_proj"), f"{a}.q_b_proj", (c.q_lora_rank, h, c.qk_head_dim), "linear")]
    out += [Leaf(("attn", "kv_a_proj"), f"{a}.kv_a_proj_with_mqa", (d, c.kv_lora_rank + c.qk_rope_head_dim), "linear"),
            Leaf(("attn", "kv_a_norm", "scale"), f"{a}.kv_a_layernorm.weight", (c.kv_lora_rank,), "vector"),
            Leaf(("attn", "kv_b_proj"), f"{a}.kv_b_proj", (c.kv_lora_rank, h, c.qk_nope_head_dim + c.v_head_dim),
                 "linear"),
            Leaf(("attn", "o_proj"), f"{a}.o_proj", (h, c.v_head_dim, d), "linear", in_ndim=2)]
    if not moe:
        return out + _mlp(("mlp",), f"{hf}.mlp", d, c.intermediate_size)
    e, f = c.n_routed_experts, c.moe_intermediate_size
    out += [Leaf(("moe", "router"), f"{hf}.mlp.gate", (d, e), "linear", force_fp32=True),
            Leaf(("moe", "e_score_correction_bias"), f"{hf}.mlp.gate.e_score_correction_bias", (e,), "vector",
                 collection="router_state", force_fp32=True)]
    for proj, (ours, down) in PROJ_IN_OUT.items():
        out.append(Leaf(("moe", ours), f"{hf}.mlp.experts", (e, f, d) if down else (e, d, f), "experts", proj=proj))
    if c.n_shared_experts:
        out += _mlp(("moe", "shared_experts"), f"{hf}.mlp.shared_experts", d, f * c.n_shared_experts)
    return out


def _mlp(path, hf: str, d: int, width: int) -> list[Leaf]:
    return [Leaf(path + ("wi_gate",), f"{hf}.gate_proj", (d, width), "linear"),
            Leaf(path + ("wi_up",), f"{hf}.up_proj", (d, width), "linear"),
            Leaf(path + ("wo",), f"{hf}.down_proj", (width, d), "linear")]


def groups(cfg: ModelConfig, prefix: str = "model.", head: str = "lm_head", mtp: Optional[int] = None) -> list[Group]:
    """All groups of the model in streaming order; `prefix`/`head` locate the decoder and the LM head in HF names."""
    c, d, v = cfg, cfg.hidden_size, cfg.vocab_size
    out = [Group("globals", "globals", -1, (
        Leaf(("embedding",), f"{prefix}embed_tokens.weight", (v, d), "embed"),
        Leaf(("final_norm", "scale"), f"{prefix}norm.weight", (d,), "vector"),
        Leaf(("lm_head",), head, (d, v), "linear")))]
    pre, pattern, n_units, suf = layer_plan(c)
    layer = lambda i: layer_leaves(c, f"{prefix}layers.{i}", c.is_moe_layer(i))  # noqa: E731
    for i in pre:
        out.append(Group(layer_name(i), "layer", i, tuple(layer(i))))
    for u in range(n_units):
        first = len(pre) + u * len(pattern)
        leaves = [l for j in range(len(pattern)) for l in _prefix((unit_layer_name(j),), layer(first + j))]
        out.append(Group(f"unit_{u}", "unit", u, tuple(leaves)))
    for i in suf:
        out.append(Group(layer_name(i), "layer", i, tuple(layer(i))))
    for m in range(c.num_mtp_layers if mtp is None else mtp):
        i = c.num_layers + m
        hf = f"{prefix}layers.{i}"
        leaves = [Leaf(("enorm", "scale"), f"{hf}.enorm.weight", (d,), "vector"),
                  Leaf(("hnorm", "scale"), f"{hf}.hnorm.weight", (d,), "vector"),
                  Leaf(("eh_proj",), f"{hf}.eh_proj", (2 * d, d), "linear"),
                  Leaf(("final_norm", "scale"), f"{hf}.shared_head.norm.weight", (d,), "vector")]
        leaves += _prefix(("block",), layer(i))
        optional = (Leaf(("embedding",), f"{hf}.embed_tokens.weight", (v, d), "embed"),
                    Leaf(("head",), f"{hf}.shared_head.head", (d, v), "linear"))
        out.append(Group(f"mtp_{m}", "mtp", m, tuple(leaves), optional))
    return out


def mtp_shared_source(leaf: Leaf, prefix: str, head: str) -> str:
    """The main-model tensor an optional MTP copy duplicates."""
    return f"{prefix}embed_tokens.weight" if leaf.path == ("embedding",) else head
