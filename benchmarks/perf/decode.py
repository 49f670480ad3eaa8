"""Decode throughput, plain vs MTP speculative, and the acceptance of CE-trained vs self-distilled MTP heads after the
policy's distribution has moved. JSON lines.

    python -m benchmarks.perf.decode               CPU toy, a few minutes: train, shift, measure (see `ablation`)
    python -m benchmarks.perf.decode --gpu         gpu_small preset, bf16, random weights (no training): measured plain
                                              and speculative tokens/s, and the speedup projected at 85 % acceptance
                                              from the measured per-round costs (target: ≥ 1.8× at ≥ 85 %)

The toy ablation (CPU), on one trunk so only the MTP loss differs:
  0. train the trunk on code (stdlib sources; main next-token loss only)
  1. train the MTP depths only (trunk frozen), once with CE (L_MTP) and once with self-distillation from the main
     head (KL to p_main), from the same initialisation and data
  2. fine-tune the trunk only on a different distribution (tool-use chat transcripts, data/synthetic.py); the MTP
     heads are not touched — the policy has moved under them, as it does during RL
  3. measure per depth k, before and after the shift: α_k = E Σ min(p_main, q_k) on held-out tokens (the expected
     acceptance of a depth-k draft at temperature 1), argmax agreement, and the engine's realised acceptance
Throughput lines time `Engine.generate` after a warm-up call (compile excluded), same prompts and settings.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Iterator

import jax
import jax.numpy as jnp
import numpy as np
import optax

from benchmarks.perf.common import add_strict_flag, apply_strict, emit
from composer2_jax.infer import Engine, SamplingParams
from composer2_jax.infer.testing import random_variables
from composer2_jax.losses.mtp import MTPLossConfig
from composer2_jax.model import Transformer
from composer2_jax.model.mtp import mtp_batch
from composer2_jax.model_config import get_model_config
from composer2_jax.train import optim
from composer2_jax.train.state import TrainState, logical_axes
from composer2_jax.train.step import StepConfig, make_train_step, mtp_loss_sums

# ------------------------------------------------------------------------------------------------- data


def batches(kind: str, seq_len: int, batch: int, seed: int = 0) -> Iterator[dict]:
    """Packed numpy batches of stdlib code ("code") or stdlib tool-use chats ("chat"), byte tokenizer."""
    from composer2_jax.data import pipeline
    from composer2_jax.data.sources import SourceConfig
    from composer2_jax.data.synthetic import write_stdlib_chats
    from composer2_jax.data.tokenizer import make_tokenizer

    if kind == "code":
        src = SourceConfig(kind="stdlib")
    else:
        path = os.path.join(tempfile.gettempdir(), "composer2_jax_bench", "stdlib_chats.jsonl")
        if not os.path.exists(path):
            write_stdlib_chats(path, n=600)
        src = SourceConfig(kind="chat_jsonl", path=path)
    dc = pipeline.DataConfig(sources=(src,), seq_len=seq_len, batch_size=batch, seed=seed, prefetch_batches=0)
    return pipeline.make_iterator(dc, make_tokenizer("byte"))


def prompts_from(batch: dict, n: int, length: int) -> list[list[int]]:
    """The first `length` tokens of the first segment of n rows (prompts from held-out data)."""
    out = []
    for row in range(min(n, batch["tokens"].shape[0])):
        seg = batch["segment_ids"][row]
        out.append([int(t) for t in batch["tokens"][row][: max(2, min(length, int(np.sum(seg == seg[0]))))]])
    return out


# ------------------------------------------------------------------------------------------------- training


def _frozen_mask(params, train: str):
    """True on the leaves that must not move: everything outside `mtp` (train='mtp') or inside it (train='trunk')."""
    return {k: jax.tree.map(lambda _, k=k: (k == "mtp") != (train == "mtp"), v) for k, v in params.items()}


def make_state(cfg, params, router_state, train: str, lr: float, steps: int):
    """(TrainState, tx): AdamW on the whole tree with the frozen part's updates zeroed."""
    boxed = jax.eval_shape(lambda: Transformer(cfg).init(jax.random.key(0), jnp.zeros((1, 4), jnp.int32)))
    oc = optim.OptimConfig(lr=lr, warmup_steps=max(steps // 10, 1), total_steps=steps, weight_decay=0.0)
    tx = optax.chain(optim.make_optimizer(oc, params, logical_axes(boxed)["params"]),
                     optax.masked(optax.set_to_zero(), _frozen_mask(params, train)))
    return TrainState(jnp.zeros((), jnp.int32), params, tx.init(params), router_state), tx


def train(cfg, state, tx, sc: StepConfig, it, steps: int):
    """`steps` steps of the project's train step; returns (state, last metrics as floats)."""
    step = jax.jit(make_train_step(Transformer(cfg), tx, sc))
    m = {}
    for _ in range(steps):
        state, m = step(state, next(it))
    return state, {k: float(v) for k, v in m.items() if np.ndim(v) == 0}


def mtp_eval_fn(cfg):
    """jitted (params, router_state, batch) -> per-depth α (Σ min(p, q)), agreement and CE on held-out tokens."""
    sc = StepConfig(mtp=MTPLossConfig(distill_weight=1.0))

    def f(params, router_state, batch):
        batch = dict(batch, **mtp_batch(batch, cfg.num_mtp_layers))
        out = Transformer(cfg).apply({"params": params, "router_state": router_state}, batch["tokens"],
                                     batch["positions"], batch["segment_ids"], mtp_tokens=batch["mtp_tokens"],
                                     compute_logits=False)
        s = mtp_loss_sums(params, out, batch, cfg, sc)
        n = jnp.maximum(s.count, 1.0)
        return {"alpha": s.accept / n, "agree": s.agree / n, "ce": s.ce / n}

    return jax.jit(f)


def ablation(*, depth: int = 2, seq_len: int = 128, batch: int = 8, steps_trunk: int = 150, steps_mtp: int = 120,
             steps_shift: int = 100, n_prompts: int = 8, prompt_len: int = 48, gen_tokens: int = 48,
             engine: bool = True, log=print) -> dict:
    """Phases 0–3 of the module docstring on the toy preset; returns {head: {"before"|"after": metrics}}."""
    cfg = get_model_config("toy", num_layers=2, num_mtp_layers=depth)
    v = random_variables(cfg, seed=0)
    code, chat = batches("code", seq_len, batch, 0), batches("chat", seq_len, batch, 0)
    held = {"before": next(batches("code", seq_len, batch, 1)), "after": next(batches("chat", seq_len, batch, 1))}
    trunk_only = StepConfig(mtp=MTPLossConfig(weight=0.0, final_weight=0.0))
    t0 = time.time()
    state, tx = make_state(cfg, v["params"], v["router_state"], "trunk", 3e-3, steps_trunk)
    state, m = train(cfg, state, tx, trunk_only, code, steps_trunk)
    log(f"[0] trunk on code: ce {m['ce']:.3f} ({time.time() - t0:.0f}s)")
    trunk_a, rs_a = state.params, state.router_state
    heads = {"ce": dict(weight=1.0, ce_weight=1.0, distill_weight=0.0, detach_trunk=True),
             "self_distill": dict(weight=1.0, ce_weight=0.0, distill_weight=1.0, detach_trunk=True)}
    trained = {}
    for name, mtp in heads.items():
        state, tx = make_state(cfg, trunk_a, rs_a, "mtp", 3e-3, steps_mtp)
        sc = StepConfig(mtp=MTPLossConfig(**mtp), router_bias_rate=0.0)
        state, m = train(cfg, state, tx, sc, batches("code", seq_len, batch, 0),
                         steps_mtp)
        trained[name] = state.params["mtp"]
        log(f"[1] MTP heads by {name}: " + ", ".join(f"{k} {m[k]:.3f}" for k in sorted(m) if k.startswith("mtp/a")))
    state, tx = make_state(cfg, trunk_a, rs_a, "trunk", 2e-3, steps_shift)
    state, m = train(cfg, state, tx, trunk_only, chat, steps_shift)
    log(f"[2] trunk fine-tuned on chats: ce {m['ce']:.3f} ({time.time() - t0:.0f}s)")
    trunks = {"before": (trunk_a, rs_a), "after": (state.params, state.router_state)}
    evaluate = mtp_eval_fn(cfg)
    out = {}
    for name, mtp_params in trained.items():
        out[name] = {}
        for when, (trunk, rs) in trunks.items():
            params = dict(trunk, mtp=mtp_params)
            r = {k: [round(float(x), 4) for x in val] for k, val in evaluate(params, rs, held[when]).items()}
            if engine:
                e = Engine(cfg, params, rs, num_draft=depth)
                e.generate(prompts_from(held[when], n_prompts, prompt_len),
                           SamplingParams(temperature=1.0, max_tokens=gen_tokens, seed=0))
                r["engine_acceptance_t1"] = round(e.stats["acceptance"], 4)
            out[name][when] = r
            log(f"[3] {name:12s} {when:6s} {r}")
    out["_models"] = {"cfg": cfg, "trunks": trunks, "heads": trained, "held": held}
    return out


# ------------------------------------------------------------------------------------------------- throughput


def throughput(cfg, params, router_state, prompts, sp: SamplingParams, num_draft: int, repeats: int = 2) -> dict:
    """Tokens/s of `Engine.generate` (best of `repeats` after a warm-up call) and its acceptance statistics."""
    engine = Engine(cfg, params, router_state, num_draft=num_draft)
    engine.generate(prompts, sp)  # compile
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        engine.generate(prompts, sp)
        best = min(best, time.perf_counter() - t)
    st = engine.stats
    return dict(tokens_per_s=st["generated"] / best, seconds=best, rounds=st["rounds"],
                acceptance=st["acceptance"], tokens=st["generated"])


def expected_tokens_per_round(alpha: float, d: int) -> float:
    """(1 − α^{D+1}) / (1 − α): tokens per target pass with i.i.d. per-draft acceptance α (Leviathan et al., eq. 1)."""
    return d + 1.0 if alpha >= 1 else (1 - alpha ** (d + 1)) / (1 - alpha)


def compare(cfg, params, router_state, prompts, sp, num_draft: int, label: str, device: str) -> dict:
    """One JSON line: plain vs speculative tokens/s, ratio, acceptance, and the ratio projected at 85 %."""
    plain = throughput(cfg, params, router_state, prompts, sp, 0)
    spec = throughput(cfg, params, router_state, prompts, sp, num_draft)
    sec_plain_pass = plain["seconds"] / max(plain["rounds"], 1)
    sec_spec_round = spec["seconds"] / max(spec["rounds"], 1)
    projected = expected_tokens_per_round(0.85, num_draft) * sec_plain_pass / sec_spec_round
    return {"bench": "decode_throughput", "model": label, "device": device, "batch": len(prompts),
            "max_tokens": sp.max_tokens, "temperature": sp.temperature, "num_draft": num_draft,
            "plain_tokens_per_s": round(plain["tokens_per_s"], 1), "spec_tokens_per_s": round(spec["tokens_per_s"], 1),
            "ratio": round(spec["tokens_per_s"] / plain["tokens_per_s"], 3),
            "acceptance": round(spec["acceptance"], 4),
            "spec_round_cost_over_plain_pass": round(sec_spec_round / sec_plain_pass, 3),
            "projected_ratio_at_85pct": round(projected, 3)}


def run_cpu(args):
    """The toy ablation, then plain vs speculative throughput on its models."""
    res = ablation(depth=2, steps_trunk=args.steps, steps_mtp=int(args.steps * 0.8), steps_shift=int(args.steps * 0.66),
                   log=lambda s: print(s, flush=True) if args.verbose else None)
    models = res.pop("_models")
    for name, r in res.items():
        print(json.dumps({"bench": "mtp_acceptance_shift", "head": name, "device": "cpu", "depth": 2, **r}))
    cfg = models["cfg"]
    for when in ("before", "after"):
        trunk, rs = models["trunks"][when]
        params = dict(trunk, mtp=models["heads"]["self_distill"])
        ps = prompts_from(models["held"][when], 8, 48)
        for sp in (SamplingParams(temperature=0.0, max_tokens=64), SamplingParams(temperature=1.0, max_tokens=64)):
            print(json.dumps(dict(compare(cfg, params, rs, ps, sp, 2, f"toy+sd_heads/{when}_shift", "cpu"))))


def run_cpu_cost(args):
    """Batch-1 decode of a ~100M-parameter random model on CPU (weight reads dominate a pass, as on an accelerator):
    the measured cost of a speculative round relative to a plain pass, and the ratio it implies at 85 %."""
    for d in (1, 2):
        cfg = get_model_config("toy", num_mtp_layers=d, hidden_size=1024, num_layers=4, num_heads=8,
                               q_lora_rank=256, kv_lora_rank=128, qk_nope_head_dim=64, qk_rope_head_dim=32,
                               v_head_dim=64, intermediate_size=2048, moe_intermediate_size=512, n_routed_experts=16,
                               num_experts_per_tok=2, n_group=1, topk_group=1, vocab_size=16384)
        v = random_variables(cfg, seed=0)
        ps = [np.random.default_rng(0).integers(0, cfg.vocab_size, 64).tolist()]
        line = compare(cfg, v["params"], v["router_state"], ps, SamplingParams(temperature=0.0, max_tokens=32), d,
                       "cpu_100m/random", "cpu")
        print(json.dumps(dict(line, bench="decode_round_cost")), flush=True)


GPU_PROMPT_LEN = 512  # --gpu: tokens per prompt


def run_gpu(args):
    """gpu_small, bf16, random weights: measured throughput and the projection at 85 % acceptance (--smoke: the toy
    preset, 2 prompts of 16 tokens, 8 new tokens — the same code path on any backend)."""
    preset, prompt_len, new = ("toy", 16, 8) if args.smoke else ("gpu_small", GPU_PROMPT_LEN, args.new_tokens)
    batch = 2 if args.smoke else args.batch
    for d in (1, 2):
        cfg = get_model_config(preset, num_mtp_layers=d, dtype="bfloat16", param_dtype="bfloat16",
                               remat_policy="none", moe_gmm_impl="padded")
        v = random_variables(cfg, seed=0, on_device=True)
        r = np.random.default_rng(0)
        ps = [r.integers(0, cfg.vocab_size, prompt_len).tolist() for _ in range(batch)]
        line = compare(cfg, v["params"], v["router_state"], ps, SamplingParams(temperature=0.0, max_tokens=new), d,
                       f"{preset}/random", jax.devices()[0].device_kind)
        emit(**line)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", action="store_true", help="gpu_small preset on the accelerator (random weights)")
    ap.add_argument("--steps", type=int, default=150, help="CPU: trunk pre-training steps (others scale with it)")
    ap.add_argument("--batch", type=int, default=16, help="GPU: prompts per batch")
    ap.add_argument("--new_tokens", type=int, default=256, help="GPU: tokens generated per prompt")
    ap.add_argument("--cost_only", action="store_true", help="CPU: only the batch-1 round-cost measurement")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="with --gpu: toy preset and lengths (runs on CPU)")
    add_strict_flag(ap)
    return ap


def main():
    args = parser().parse_args()
    apply_strict(args)
    if args.gpu:
        run_gpu(args)
    else:
        run_cpu(args) if not args.cost_only else None
        run_cpu_cost(args)


if __name__ == "__main__":
    main()
