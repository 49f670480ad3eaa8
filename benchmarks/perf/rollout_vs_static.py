"""The rollout engine against the static engine on a multi-turn agentic workload, side by side in one run. JSON lines.

    python -m benchmarks.perf.rollout_vs_static                     CPU toy, ~2 min on 2 cores (16 episodes × 4 turns)
    python -m benchmarks.perf.rollout_vs_static --preset moe100m    the ~100M-parameter MoE (same workload, slower)
    python -m benchmarks.perf.rollout_vs_static --gpu               gpu_small preset, bf16, 64 episodes × 8 turns, the
                                                            rollout engine only (see below)
    ... --gpu --only both                                    adds the static baseline at --static-slots (2: the most
                                                            rows of its fixed [rows, 18,736] program one H200 holds)
    ... --only static | --only rollout                       one engine (halves a slow run; no output comparison)
    ... --turns 8 --obs-min 50 --obs-max 2000 --reply-median 24 --reply-max 128
                                                            the issue's workload shape (observations 50–2,000
                                                            tokens, long-tailed replies); the static engine's
                                                            prefill runs in query chunks (--static-prefill-chunk)
    ... --num-draft 2                                        MTP speculative decoding: the rollout engine without
                                                            and with 2 drafts per slot (the model gets that many MTP
                                                            depths), same outputs checked, acceptance reported

Workload (seeded): E episodes, each a shared system prompt + its own task, then T turns of (reply, observation);
reply budgets are long-tailed (lognormal, capped), observations uniform in [obs_min, obs_max] tokens. Greedy
decoding with random weights and no stop sequence, so each reply is exactly its budget and both engines must
produce the same tokens (checked: `same_outputs`).

  static   the old rollout service: each turn, the pending requests in batches of `slots` through one fixed-shape
           `Engine.generate` [slots, max context], every context re-prefilled from token 0, every batch running to
           its longest reply (rounded up to a power of two ≥ 8: one compiled program per bucket, all warmed up);
           on CPU its prefill runs in query chunks of 512 (same positions computed, bounded score memory)
  rollout  `RolloutEngine`: one session per episode (only new tokens prefilled; the system prompt's pages shared),
           `slots` decode slots, chunked prefill, each episode's next turn queued as soon as its reply ends

Per engine: generated tokens/s (wall, compile excluded by a warm-up), prefill work = tokens the engine computed per
episode ÷ the episode's distinct tokens (static: every prompt position of every turn; rollout: positions its
programs fed, preemption recompute included, minus the reply tokens it decoded), turn latency p50/p99 (request →
reply), cache memory (static: its [slots, S] latent caches; rollout: the page pool), and the speedup.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time

import numpy as np

from composer2_jax.infer import Engine, SamplingParams
from composer2_jax.infer.paged_cache import bytes_per_token
from composer2_jax.infer.rollout_engine import EngineConfig, RolloutEngine
from composer2_jax.infer.testing import random_variables
from composer2_jax.model.layers import dtype_of
from composer2_jax.model_config import get_model_config
from composer2_jax.params import count_params


@dataclasses.dataclass(frozen=True)
class Workload:
    """The multi-turn episodes."""

    episodes: int = 16  # concurrent episodes
    turns: int = 4  # replies per episode
    system: int = 96  # shared system prompt tokens
    task: int = 32  # per-episode task tokens
    obs_min: int = 16  # observation length range (tokens)
    obs_max: int = 256
    reply_median: int = 12  # reply budgets: lognormal around this, capped at reply_max
    reply_max: int = 64
    seed: int = 0

    def draw(self, vocab: int):
        """(prompts [E], observations [E][T−1], reply budgets [E][T])."""
        r = np.random.default_rng(self.seed)
        system = r.integers(0, vocab, self.system).tolist()
        prompts = [system + r.integers(0, vocab, self.task).tolist() for _ in range(self.episodes)]
        obs = [[r.integers(0, vocab, int(r.integers(self.obs_min, self.obs_max + 1))).tolist()
                for _ in range(self.turns - 1)] for _ in range(self.episodes)]
        budgets = np.minimum(np.maximum(1, np.round(r.lognormal(np.log(self.reply_median), 0.9,
                                                                 (self.episodes, self.turns)))), self.reply_max)
        return prompts, obs, budgets.astype(int).tolist()

    @property
    def max_context(self) -> int:
        return self.system + self.task + (self.turns - 1) * self.obs_max + self.turns * self.reply_max


def run_static(cfg, v, wl: Workload, slots: int, prefill_chunk: int | None = None) -> dict:
    """The static path, turn by turn in fixed-shape batches (prefill in query chunks of `prefill_chunk`)."""
    prompts, obs, budgets = wl.draw(cfg.vocab_size)
    engine = Engine(cfg, v["params"], v["router_state"], prefill_chunk=prefill_chunk)
    p_len = -(-wl.max_context // 16) * 16
    ctx = [list(p) for p in prompts]
    buckets = [b for b in (2 ** i for i in range(3, 12)) if b < wl.reply_max] + [wl.reply_max]
    bucket = lambda rows, turn: min(b for b in buckets if b >= max(budgets[e][turn] for e in rows))  # noqa: E731
    batches = [list(range(len(prompts)))[i:i + slots] for i in range(0, len(prompts), slots)]
    for b in sorted({bucket(rows, turn) for turn in range(wl.turns) for rows in batches}):
        # compile the reply buckets this seeded workload uses outside the timing (every call runs the whole
        # [slots, p_len] program, so warming unused buckets would only cost time)
        engine.generate([ctx[0]], SamplingParams(temperature=0.0, max_tokens=b), shape=(slots, p_len))
    outs = [[] for _ in prompts]
    lat, computed, gen = [], np.zeros(len(prompts)), 0
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    for turn in range(wl.turns):
        asked = time.perf_counter()
        for rows in batches:
            sp = SamplingParams(temperature=0.0, max_tokens=bucket(rows, turn))
            res = engine.generate([ctx[e] for e in rows], sp, shape=(slots, p_len))
            done = time.perf_counter()
            for e, c in zip(rows, res):
                reply = c.tokens[:budgets[e][turn]]
                outs[e].append(reply)
                computed[e] += len(ctx[e])
                gen += len(reply)
                ctx[e] += reply + (obs[e][turn] if turn < wl.turns - 1 else [])
                lat.append(done - asked)
    wall = time.perf_counter() - t0
    distinct = np.array([len(c) for c in ctx]) - np.array([sum(map(len, o)) for o in outs])  # context minus replies
    cache = slots * (p_len + wl.reply_max + 2) * _bpt(cfg)
    return _line("static", wall, gen, computed, distinct, lat, cache, load0), outs


def warm_rollout(cfg, v, wl: Workload, ecfg: EngineConfig) -> RolloutEngine:
    """A throwaway engine that has run both programs once (compiled outside the timing)."""
    prompts, _, _ = wl.draw(cfg.vocab_size)
    warm = RolloutEngine(cfg, v["params"], v["router_state"], ecfg)
    s = warm.open(prompts[0][:ecfg.chunk + 1])
    warm.reply(s, SamplingParams(temperature=0.0, max_tokens=2))
    warm.run()
    return warm


def run_rollout(cfg, v, wl: Workload, ecfg: EngineConfig, warm: RolloutEngine | None = None) -> dict:
    """The rollout engine: sessions, continuous batching; each episode's next turn as soon as its reply ends."""
    prompts, obs, budgets = wl.draw(cfg.vocab_size)
    warm = warm or warm_rollout(cfg, v, wl, ecfg)
    eng = RolloutEngine(cfg, v["params"], v["router_state"], ecfg)
    sids = [eng.open(p) for p in prompts]
    outs = [[] for _ in prompts]
    lat, asked, futs = [], {}, {}
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    for e, sid in enumerate(sids):
        asked[e], futs[e] = time.perf_counter(), eng.reply(sid, SamplingParams(temperature=0.0,
                                                                               max_tokens=budgets[e][0]))
    while futs:
        eng.step()
        for e in [e for e, f in futs.items() if f.done()]:
            now = time.perf_counter()
            lat.append(now - asked[e])
            outs[e].append(futs.pop(e).result().tokens)
            turn = len(outs[e])
            if turn < wl.turns:
                eng.append(sids[e], obs[e][turn - 1])
                asked[e], futs[e] = now, eng.reply(sids[e], SamplingParams(temperature=0.0,
                                                                           max_tokens=budgets[e][turn]))
    wall = time.perf_counter() - t0
    gen = sum(len(r) for o in outs for r in o)
    computed = np.array([eng.sessions[s].computed for s in sids]) - np.array([sum(map(len, o)) - len(o)
                                                                              for o in outs])
    distinct = np.array([len(eng.tokens(s)) for s in sids]) - np.array([sum(map(len, o)) for o in outs])
    rep = eng.report()
    line = _line("rollout", wall, gen, computed, distinct, lat, rep["pool_bytes"], load0)
    line.update(adopted=rep["adopted"], preemptions=rep["preemptions"], compilations_traced=warm.compilations,
                steps=rep["steps"], referenced_pages_at_end=rep["referenced"], num_draft=ecfg.num_draft,
                acceptance=None if rep["acceptance"] is None else round(rep["acceptance"], 3))
    return line, outs


def _bpt(cfg) -> int:
    """Latent cache bytes per token at the compute dtype."""
    return bytes_per_token(cfg, cfg.num_layers, np.dtype(dtype_of(cfg.dtype)).itemsize)


def _line(engine, wall, gen, computed, distinct, lat, cache_bytes, load_start) -> dict:
    """One engine's figures; load averages (1 min) at the start and the end of its timed part."""
    lat = np.asarray(lat)
    return dict(engine=engine, date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                loadavg_1m_start=round(load_start, 2), loadavg_1m=round(os.getloadavg()[0], 2),
                seconds=round(wall, 2), generated=int(gen),
                tokens_per_s=round(gen / wall, 1),
                prefill_per_distinct=round(float(np.mean(computed / distinct)), 3),
                turn_latency_p50_s=round(float(np.percentile(lat, 50)), 3),
                turn_latency_p99_s=round(float(np.percentile(lat, 99)), 3), cache_bytes=int(cache_bytes))


PRESETS = {
    "toy": dict(num_layers=2, num_mtp_layers=0),
    # ~100M total parameters: Kimi-shaped MoE (MLA, 16 experts top-4 + shared), 8 layers. The padded grouped
    # matmul (both engines): on CPU, 'auto' means lax.ragged_dot, which XLA:CPU lowers to a masked dense matmul of
    # every routed row against all 16 experts (model/grouped_matmul.py: 16× the routed work); padded runs
    # [16 experts, C slots], C = 2 × the mean load rounded up to 8 (2× the routed work in a prefill chunk, 4× in an
    # [8, 1] decode step), exact either way (a larger group takes the ragged path).
    "moe100m": dict(vocab_size=32768, hidden_size=512, num_layers=8, num_heads=8, q_lora_rank=256, kv_lora_rank=128,
                    qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32, intermediate_size=1536,
                    moe_intermediate_size=256, n_routed_experts=16, num_experts_per_tok=4, n_group=4, topk_group=2,
                    num_mtp_layers=0, moe_gmm_impl="padded"),
}


def engine_config(wl: Workload, slots: int, chunk: int, page: int = 16) -> EngineConfig:
    """The rollout engine for `wl`: a page pool that holds every episode at its longest context at once."""
    max_len = -(-wl.max_context // page) * page
    return EngineConfig(slots=slots, chunk=chunk, prefill_rows=2, page_size=page,
                        num_pages=wl.episodes * max_len // page + 1, max_len=max_len)


# The static baseline's rows under --gpu: its [rows, 18,736-token context] program with 512 new tokens compiles just
# inside the GPU suite's memory budget at 2 rows on CPU (an upper bound), far outside it at 16 (compiled peaks, with
# their dates: benchmarks/RESULTS.md, "GPU readiness").
GPU_STATIC_SLOTS = 2


# The static engine's prefill query chunk on CPU: at the workload (observations up to 2,000 tokens, contexts
# ~14.6k) one pass over [8 rows, P] would materialise fp32 scores [8, heads, P, P] (27 GB on the toy); in chunks of
# 512 they are [8, heads, 512, P] (~1 GB). Same positions computed (Engine's prefill_chunk). --gpu keeps one pass,
# the program benchmarks/perf/gpu_fit.py compiles.
CPU_STATIC_PREFILL_CHUNK = 512


# --gpu --num-draft's depth: benchmarks/perf/gpu_fit.py compiles the drafting programs (prefill writing the MTP and h_0
# pools, the [16, 1 + D] draft-and-verify decode) at it, next to the page pool.
GPU_NUM_DRAFT = 2


def gpu_setup(num_draft: int = 0):
    """--gpu: (model config, workload, engine config) — gpu_small bf16, 64 episodes × 8 turns, 16 slots, chunk 256,
    `num_draft` MTP depths on the model and drafts per slot in the engine (benchmarks/perf/gpu_fit.py compiles these
    programs on CPU against one H200)."""
    cfg = get_model_config("gpu_small", num_mtp_layers=num_draft, dtype="bfloat16", param_dtype="bfloat16")
    wl = Workload(episodes=64, turns=8, system=512, task=128, obs_min=50, obs_max=2000, reply_median=64,
                  reply_max=512)
    return cfg, wl, dataclasses.replace(engine_config(wl, slots=16, chunk=256), num_draft=num_draft)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="toy", choices=sorted(PRESETS))
    ap.add_argument("--gpu", action="store_true", help="gpu_small preset, bf16, 64 episodes × 8 turns")
    ap.add_argument("--episodes", type=int, default=16)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--obs-min", type=int, default=Workload.obs_min, help="shortest observation (tokens)")
    ap.add_argument("--obs-max", type=int, default=Workload.obs_max, help="longest observation (tokens)")
    ap.add_argument("--reply-median", type=int, default=Workload.reply_median,
                    help="median reply budget (lognormal, sigma 0.9: long-tailed)")
    ap.add_argument("--reply-max", type=int, default=Workload.reply_max, help="reply budget cap (the tail's end)")
    ap.add_argument("--static-prefill-chunk", type=int, default=CPU_STATIC_PREFILL_CHUNK,
                    help="the static engine's prefill query chunk on CPU (bounds its [rows, heads, chunk, context] "
                         "scores; 0: whole prompt in one pass)")
    ap.add_argument("--only", choices=("static", "rollout", "both"),
                    help="which engines (default: both on CPU; rollout under --gpu, where the static baseline at "
                         "the engine's 16 slots needs 787 GB, benchmarks/RESULTS.md)")
    ap.add_argument("--num-draft", type=int, default=0,
                    help="compare the rollout engine without and with this many MTP drafts per slot (no static run)")
    ap.add_argument("--static-slots", type=int,
                    help="rows of the static baseline's fixed batch (default: --slots on CPU, "
                         f"{GPU_STATIC_SLOTS} under --gpu)")
    return ap.parse_args(argv)


def setup(args):
    """(model config, workload, static rows, static prefill chunk, engine config, which engines) for `args`."""
    if args.gpu:
        if args.num_draft > GPU_NUM_DRAFT:
            raise SystemExit(f"--gpu --num-draft {args.num_draft}: the drafting programs are sized for one H200 at "
                             f"num_draft ≤ {GPU_NUM_DRAFT} (benchmarks/perf/gpu_fit.py)")
        cfg, wl, ecfg = gpu_setup(args.num_draft)
        return cfg, wl, args.static_slots or GPU_STATIC_SLOTS, None, ecfg, args.only or "rollout"
    if not 1 <= args.obs_min <= args.obs_max:
        raise SystemExit(f"--obs-min {args.obs_min} / --obs-max {args.obs_max}: need 1 <= min <= max")
    if not 1 <= args.reply_median <= args.reply_max:
        raise SystemExit(f"--reply-median {args.reply_median} / --reply-max {args.reply_max}: need 1 <= median <= max")
    cfg = get_model_config("toy", **dict(PRESETS[args.preset], num_mtp_layers=args.num_draft))
    wl = Workload(episodes=args.episodes, turns=args.turns, obs_min=args.obs_min, obs_max=args.obs_max,
                  reply_median=args.reply_median, reply_max=args.reply_max)
    return (cfg, wl, args.static_slots or args.slots, args.static_prefill_chunk or None,
            engine_config(wl, args.slots, args.chunk), args.only or "both")


def main(argv=None):
    args = parse_args(argv)
    cfg, wl, slots, prefill_chunk, ecfg, only = setup(args)
    v = random_variables(cfg, seed=0, head_scale=20.0, on_device=args.gpu)
    head = dict(bench="rollout_engine", preset="gpu_small" if args.gpu else args.preset,
                params=count_params(v["params"], cfg)[0], **dataclasses.asdict(wl), chunk=ecfg.chunk)
    if args.num_draft:
        lines = []
        for d in (0, args.num_draft):
            line, out = run_rollout(cfg, v, wl, dataclasses.replace(ecfg, num_draft=d))
            print(json.dumps(dict(head, slots=ecfg.slots, **line)), flush=True)
            lines.append((line, out))
        (plain, p_out), (spec, d_out) = lines
        print(json.dumps(dict(head, engine="compare_drafts", same_outputs=p_out == d_out,
                              speedup_tokens_per_s=round(spec["tokens_per_s"] / plain["tokens_per_s"], 2))),
              flush=True)
        return
    # the rollout engine's programs compile first: a failure there surfaces before the long static half
    warm = warm_rollout(cfg, v, wl, ecfg) if only != "static" else None
    if only != "rollout":
        static, s_out = run_static(cfg, v, wl, slots, prefill_chunk)
        print(json.dumps(dict(head, slots=slots, static_prefill_chunk=prefill_chunk, **static)), flush=True)
    if only != "static":
        rollout, r_out = run_rollout(cfg, v, wl, ecfg, warm)
        print(json.dumps(dict(head, slots=ecfg.slots, **rollout)), flush=True)
    if only != "both":
        return
    print(json.dumps(dict(head, engine="compare", same_outputs=s_out == r_out,
                          speedup_tokens_per_s=round(rollout["tokens_per_s"] / static["tokens_per_s"], 2),
                          bytes_per_token=_bpt(cfg))), flush=True)


if __name__ == "__main__":
    main()
