"""The rollout side of an RL plan, from the model config and the chip's ceilings (no compile needed).

`python -m composer2_jax.plan --stage rl` plans the trainer by compiling its step (composer2_jax/plan/report.py) and
then this: what one rollout engine holds and how fast it can decode, what a weight sync costs, and how to split a
pod between trainer and rollout engines for a target staleness. All figures are bounds from bytes and FLOPs:

  * Latent cache: MLA caches one compressed latent (kv_lora_rank) and one shared rotary key (qk_rope_head_dim) per
    token per layer, MTP layers included — `latent_bytes_per_token`.
  * Concurrent episodes per engine: (usable HBM − the engine's weight shard) / (cache bytes of one episode at the
    stage's context). An episode's cache grows as it runs; sizing for the full context is what a pool that never
    preempts must reserve.
  * Decode step (one token for each of B episodes): HBM bytes = the non-expert weights + the routed experts the
    batch touches (E · (1 − (1 − k/E)^B) per MoE layer, the expected number of distinct experts B tokens select)
    + every episode's cache at its mean fill; FLOPs = 2 · active params · B + absorbed-MLA attention over the cache;
    communication = the expert-parallel dispatch and combine of B · k hidden vectors per MoE layer. Step time =
    max(bytes / HBM bandwidth, FLOPs / peak) + communication (no overlap: a bound that favours nothing).
  * Weight sync: every engine receives the full bf16 model; the trainer sends from all its chips at once, each
    engine receives on all of its chips: time = max(engines · bytes / trainer egress, bytes / engine ingress),
    over the inter-node links when the two sides are on different nodes.
  * Split: the trainer's step time at `train_chips` (from the compiled plan, or given) scales as 1 / chips (the
    stated assumption: same per-chip efficiency at the neighbouring sizes); generating one version's samples takes
    samples · generated tokens / (engines · engine tokens/s). With staleness η ≥ 1 the two overlap and a version
    costs max(train, generate) + sync; at η = 0 they alternate (train + generate + sync), and the colocated
    placement (all chips do both, no sync, one swap of optimizer state for cache) is the comparison.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp
from flax import linen as nn

from composer2_jax.chips import Chip
from composer2_jax.model import Transformer
from composer2_jax.model_config import ModelConfig
from composer2_jax.params import count_params


@dataclasses.dataclass(frozen=True)
class ModelBytes:
    """Parameter counts of a config, split the way decoding reads them."""

    total: int  # all parameters, MTP modules included
    active: int  # per token: total minus the routed experts a token does not select
    expert_params: int  # one routed expert's SwiGLU (gate, up, down) in one MoE layer
    moe_layers: int  # layers with routed experts, MTP layers included
    cached_layers: int  # layers that keep an attention cache: the trunk and the MTP modules
    routed: int  # all routed-expert parameters (every expert of every MoE layer)


def model_bytes(cfg: ModelConfig) -> ModelBytes:
    """Exact parameter counts of `cfg`, from the abstract parameter tree (nothing is allocated)."""
    abstract = nn.unbox(jax.eval_shape(lambda k: Transformer(cfg).init(k, jnp.zeros((1, 4), jnp.int32)),
                                       jax.random.key(0)))["params"]
    total, active = count_params(abstract, cfg)
    layers = cfg.num_layers + cfg.num_mtp_layers
    moe_layers = sum(cfg.is_moe_layer(i) for i in range(layers)) if cfg.n_routed_experts else 0
    return ModelBytes(total=total, active=active, expert_params=3 * cfg.hidden_size * cfg.moe_intermediate_size,
                      moe_layers=moe_layers, cached_layers=layers,
                      routed=3 * cfg.hidden_size * cfg.moe_intermediate_size * moe_layers * cfg.n_routed_experts)


def latent_bytes_per_token(cfg: ModelConfig, cache_bytes: int = 2) -> int:
    """MLA cache bytes per token: one latent and one shared rotary key per cached layer (MTP layers included)."""
    return (cfg.num_layers + cfg.num_mtp_layers) * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * cache_bytes


def experts_touched(n_experts: int, top_k: int, tokens: int) -> float:
    """Expected distinct experts `tokens` independent top-k selections touch (uniform routing)."""
    if not n_experts:
        return 0.0
    return n_experts * (1.0 - (1.0 - top_k / n_experts) ** tokens)


@dataclasses.dataclass(frozen=True)
class RolloutSetup:
    """What a rollout engine runs: its size, the episode context it budgets for, the dtypes it keeps."""

    engine_chips: int = 8  # chips per engine (expert/tensor parallel inside it); replicas are separate engines
    context: int = 65536  # tokens per episode the cache pool budgets for (the RL stage's context)
    mean_fill: float = 0.5  # mean fraction of the context an episode's cache holds while it decodes
    weight_bytes: float = 1.0  # bytes per weight on the engine: 1 = fp8 (how K2-class models are served), 2 = bf16
    cache_bytes: int = 2  # bytes per cached latent element
    hbm_usable: float = 0.9  # fraction of HBM the engine may fill (the rest: activations, workspace, fragmentation)
    max_batch: int = 1024  # decode slots per engine at most (the engine's compiled batch)

    def __post_init__(self):
        for name in ("engine_chips", "context", "cache_bytes", "max_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"RolloutSetup.{name} = {getattr(self, name)}; expected an integer ≥ 1")
        if not self.weight_bytes > 0:
            raise ValueError(f"RolloutSetup.weight_bytes = {self.weight_bytes}; expected bytes per weight > 0")
        for name in ("mean_fill", "hbm_usable"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise ValueError(f"RolloutSetup.{name} = {getattr(self, name)}; expected a fraction in (0, 1]")


def decode_step(cfg: ModelConfig, mb: ModelBytes, chip: Chip, setup: RolloutSetup, batch: int) -> dict:
    """Bound on one decode step (one token for each of `batch` episodes) of one engine."""
    n = setup.engine_chips
    touched = experts_touched(cfg.n_routed_experts, cfg.num_experts_per_tok, batch)
    non_expert = mb.total - mb.routed
    weight_read = (non_expert + touched * mb.moe_layers * mb.expert_params) * setup.weight_bytes
    cache_read = batch * setup.mean_fill * setup.context * latent_bytes_per_token(cfg, setup.cache_bytes)
    ctx = setup.mean_fill * setup.context
    # absorbed MLA: scores and values over the latent + rotary key, per head, per cached layer
    attn_flops = 4 * cfg.num_heads * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * ctx * mb.cached_layers
    flops = batch * (2 * mb.active + attn_flops)
    # expert parallelism across the engine's chips: dispatch + combine of every routed copy, bf16
    a2a = 2 * batch * cfg.num_experts_per_tok * cfg.hidden_size * 2 * mb.moe_layers * (n - 1) / n if n > 1 else 0.0
    link = chip.ici_bw if n <= chip.node_size else chip.dcn_bw
    t_mem = (weight_read + cache_read) / (chip.hbm_bw * n)
    t_flops = flops / (chip.peak_bf16_flops * n)
    t_comm = a2a / (link * n)
    t = max(t_mem, t_flops) + t_comm
    return dict(batch=batch, step_s=t, tokens_per_s=batch / t, memory_s=t_mem, compute_s=t_flops, comm_s=t_comm,
                weight_bytes_read=weight_read, cache_bytes_read=cache_read, experts_touched=touched,
                bound="memory" if t_mem >= t_flops else "compute")


def rollout_engine(cfg: ModelConfig, chip: Chip, setup: RolloutSetup, mb: Optional[ModelBytes] = None) -> dict:
    """One engine: memory per chip, concurrent episodes that fit, decode tokens/s at that concurrency."""
    mb = mb or model_bytes(cfg)
    n = setup.engine_chips
    weights_per_chip = mb.total * setup.weight_bytes / n
    per_token = latent_bytes_per_token(cfg, setup.cache_bytes)
    per_episode = per_token * setup.context
    free = (chip.hbm_bytes * setup.hbm_usable - weights_per_chip) * n
    if free <= per_episode:
        raise ValueError(f"engine of {n} × {chip.name}: {n} chips hold "
                         f"{weights_per_chip / 1e9:.1f} GB of weights per chip, leaving "
                         f"{max(free, 0) / 1e9:.1f} GB for caches, less than one episode's "
                         f"{per_episode / 1e9:.2f} GB at context {setup.context}; expected a larger engine_chips")
    episodes = min(int(free // per_episode), setup.max_batch)
    step = decode_step(cfg, mb, chip, setup, episodes)
    return dict(engine_chips=n, weights_gb_per_chip=weights_per_chip / 1e9, cache_bytes_per_token=per_token,
                cache_gb_per_episode=per_episode / 1e9, concurrent_episodes=episodes, decode=step,
                tokens_per_s=step["tokens_per_s"])


def weight_sync_s(mb: ModelBytes, chip: Chip, setup: RolloutSetup, train_chips: int, engines: int,
                  same_node: bool = False) -> float:
    """Seconds to put one version's weights on every engine (disaggregated placement)."""
    if engines == 0:
        return 0.0
    link = chip.ici_bw if same_node else chip.dcn_bw
    bytes_ = mb.total * setup.weight_bytes
    return max(engines * bytes_ / (train_chips * link), bytes_ / (setup.engine_chips * link))


@dataclasses.dataclass(frozen=True)
class Workload:
    """One RL version's work."""

    samples: int  # episodes per version (the trainer's batch)
    generated_tokens: int  # mean sampled tokens per episode (all turns)
    train_step_s: float  # the trainer's step time on train_chips for this batch (from the compiled plan)
    train_chips: int  # chips that step time was planned on
    staleness: int = 1  # η: versions a sample may lag the trainer (0 = synchronous)

    def __post_init__(self):
        for name in ("samples", "generated_tokens", "train_chips"):
            if getattr(self, name) < 1:
                raise ValueError(f"Workload.{name} = {getattr(self, name)}; expected an integer ≥ 1")
        if self.train_step_s <= 0 or self.staleness < 0:
            raise ValueError(f"Workload: train_step_s = {self.train_step_s}, staleness = {self.staleness}; expected "
                             f"a positive step time and a staleness ≥ 0")


def split_pod(cfg: ModelConfig, chip: Chip, setup: RolloutSetup, work: Workload, pod: int,
              mb: Optional[ModelBytes] = None) -> dict:
    """Every trainer/rollout split of `pod` chips in whole nodes (engines of setup.engine_chips on the rest),
    ranked by seconds per version; plus the colocated placement for comparison."""
    mb = mb or model_bytes(cfg)
    engine = rollout_engine(cfg, chip, setup, mb)
    unit = max(chip.node_size if chip.node_size < pod else setup.engine_chips, setup.engine_chips)
    if pod % unit:
        raise ValueError(f"pod = {pod} chips; expected a multiple of {unit} (nodes of {chip.node_size}, engines of "
                         f"{setup.engine_chips})")
    gen_tokens = work.samples * work.generated_tokens

    def train_s(chips):
        return work.train_step_s * work.train_chips / chips

    rows = []
    for train_chips in range(unit, pod, unit):
        engines = (pod - train_chips) // setup.engine_chips
        t_train = train_s(train_chips)
        t_gen = gen_tokens / (engines * engine["tokens_per_s"])
        t_sync = weight_sync_s(mb, chip, setup, train_chips, engines)
        t_version = (max(t_train, t_gen) if work.staleness >= 1 else t_train + t_gen) + t_sync
        rows.append(dict(train_chips=train_chips, rollout_chips=pod - train_chips, engines=engines,
                         train_s=t_train, generate_s=t_gen, sync_s=t_sync, version_s=t_version,
                         samples_per_s=work.samples / t_version))
    rows.sort(key=lambda r: r["version_s"])
    engines_all = pod // setup.engine_chips
    colocated_gen = gen_tokens / (engines_all * engine["tokens_per_s"])
    colocated = dict(train_s=train_s(pod), generate_s=colocated_gen, version_s=train_s(pod) + colocated_gen,
                     samples_per_s=work.samples / (train_s(pod) + colocated_gen))
    return dict(engine=engine, workload=dataclasses.asdict(work), pod=pod, best=rows[0], ranked=rows,
                colocated=colocated, weight_sync_gb=mb.total * setup.weight_bytes / 1e9)


def human(plan: dict) -> str:
    """The rollout side and the recommended split, one screen."""
    e, d, b = plan["engine"], plan["engine"]["decode"], plan["best"]
    lines = [
        f"  rollout engine ({e['engine_chips']} chips): weights {e['weights_gb_per_chip']:.1f} GB/chip; MLA cache "
        f"{e['cache_bytes_per_token'] / 1e3:.1f} KB/token, {e['cache_gb_per_episode']:.2f} GB per episode; "
        f"{e['concurrent_episodes']} concurrent episodes; decode ≤ {e['tokens_per_s']:,.0f} tok/s "
        f"({d['bound']}-bound, step {d['step_s'] * 1e3:.1f} ms, {d['experts_touched']:.0f} experts touched/layer)",
        f"  weight sync: {plan['weight_sync_gb']:.0f} GB per engine per version",
        f"  best split of {plan['pod']} chips at staleness {plan['workload']['staleness']}: trainer "
        f"{b['train_chips']}, rollout {b['rollout_chips']} ({b['engines']} engines): train {b['train_s']:.1f} s, "
        f"generate {b['generate_s']:.1f} s, sync {b['sync_s']:.1f} s → {b['version_s']:.1f} s per version, "
        f"{b['samples_per_s']:.2f} samples/s",
        f"  colocated (all {plan['pod']} chips alternate): {plan['colocated']['version_s']:.1f} s per version, "
        f"{plan['colocated']['samples_per_s']:.2f} samples/s",
    ]
    return "\n".join(lines)
