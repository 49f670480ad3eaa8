"""The static inference engine: batched prefill and decode over the MLA latent cache, optional MTP speculative decoding.

Not for serving: RL rollouts and the benchmark's model agent use `RolloutEngine` (infer/rollout_engine.py: sessions,
continuous batching, paged cache, MTP drafts — `EngineConfig.num_draft`). This engine stays as the independent
reference the rollout engine is tested against (tests/test_rollout_engine.py, tests/test_speculative.py) and as the
baseline of benchmarks/perf/rollout_vs_static.py and benchmarks/perf/decode.py (whose --gpu stage
benchmarks/perf/gpu_fit.py sizes).

    engine = Engine(cfg, params, router_state, mesh=None, num_draft=0)      # num_draft ≤ cfg.num_mtp_layers
                                                   # prefill_chunk=1024: prompt in query chunks (bounded memory)
    outs = engine.generate([[1, 2, 3], [4, 5]], SamplingParams(temperature=1.0, max_tokens=64, stop=((7,),)))
    outs[0].tokens, outs[0].logprobs, outs[0].policy_logprobs, outs[0].routing, outs[0].finish_reason

Generation is one jitted program per (batch, padded prompt length, max_tokens, static sampling settings):
  1. prefill: ragged prompts are packed right-padded into [B, P]; slot = position, each row has its own length, so
     no padding token is ever attended (left-padded batches are the same thing with the pad stripped)
  2. sample the first token from the last prompt position; with drafts, run the MTP depths over the prompt
  3. device while-loop of rounds (infer/speculative.py): verify/decode 1 + D tokens, accept, commit, check stop
     sequences and max_tokens, draft the next D — plain decoding is the D = 0 case of the same loop
The host then cuts each row at its first stop sequence (kept in the output: the sampled ids the trainer needs)
or at max_tokens.

Router replay: `Completion.routing[j]` [L_moe, k] are the experts of the forward position that produced token j
(the last prompt position for j = 0), `prompt_routing` covers prompt positions 0..P−2, so
`replay_routing()` = [L_moe, P−1+n, k] lines up with the trainer's input tokens prompt + completion[:-1].
Logprobs: see infer/sampler.py — the RL trainer's behaviour log-prob μ is `policy_logprobs`.

Sharding: with a mesh, params are placed by their logical axes (the one rules table), the program runs under
`sharding.activate(mesh)` (heads split over `tensor`) and gets the mesh explicitly, so MoE layers dispatch
expert-parallel; the batch is padded to a multiple of the batch-sharding axes with inert rows.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from composer2_jax import sharding as shd
from composer2_jax.infer import kv_cache, sampler, speculative
from composer2_jax.model.decoding import Decoder, Feed, TrunkOut
from composer2_jax.model.layer_plan import moe_layer_ids
from composer2_jax.model.layers import dtype_of
from composer2_jax.model_config import ModelConfig
from composer2_jax.sharding import Placement


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """How to sample. temperature 0 = greedy; top_k 0 and top_p 1 = off; stop: token-id sequences."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: int = 64
    stop: tuple[tuple[int, ...], ...] = ()
    seed: int = 0
    vocab_limit: int = 0  # ids ≥ this are never sampled: a model vocabulary padded beyond the tokenizer's (0 = all)

    def __post_init__(self):
        object.__setattr__(self, "stop", tuple(tuple(int(t) for t in s) for s in self.stop))
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must lie in (0, 1], got {self.top_p}")
        if self.top_k < 0 or self.max_tokens < 1:
            raise ValueError(f"top_k must be >= 0 and max_tokens >= 1, got top_k={self.top_k}, "
                             f"max_tokens={self.max_tokens}")
        if self.vocab_limit < 0:
            raise ValueError(f"vocab_limit must be >= 0 (0 = the whole vocabulary), got {self.vocab_limit}")
        if any(len(s) == 0 for s in self.stop):
            raise ValueError(f"stop sequences must be non-empty, got {self.stop}")

    def warp(self) -> sampler.Warp:
        """The static part of the settings."""
        return sampler.Warp(self.temperature == 0, self.top_k, self.top_p < 1, self.vocab_limit)


@dataclasses.dataclass
class Completion:
    """One generated continuation."""

    tokens: list[int]
    logprobs: list[float]  # log-prob under the distribution actually sampled (temperature, top-k, top-p applied)
    routing: Optional[np.ndarray]  # [n, L_moe, k] int32 experts of the position that produced each token; None dense
    finish_reason: str  # "stop" (a stop sequence, included in tokens) | "length" (max_tokens)
    policy_logprobs: list[float] = dataclasses.field(default_factory=list)  # full softmax at T: the RL μ
    raw_logprobs: list[float] = dataclasses.field(default_factory=list)  # full softmax at temperature 1
    prompt_routing: Optional[np.ndarray] = None  # [P−1, L_moe, k] experts of prompt positions 0..P−2
    versions: list[int] = dataclasses.field(default_factory=list)  # weight version that sampled each token (rollout
    #                                                                engine; empty from the static engine)

    def replay_routing(self) -> Optional[np.ndarray]:
        """[L_moe, P−1+n, k]: recorded routing for the trainer's input tokens prompt + completion[:-1]."""
        if self.routing is None:
            return None
        return np.concatenate([self.prompt_routing, self.routing]).transpose(1, 0, 2)


class GenOut(NamedTuple):
    """What the device program returns (per padded row)."""

    tokens: jax.Array  # [B, Nb] int32
    logprobs: jax.Array  # [B, Nb]
    policy_logprobs: jax.Array  # [B, Nb]
    raw_logprobs: jax.Array  # [B, Nb]
    routing: Optional[jax.Array]  # [B, Nb, L_moe, k]
    prompt_routing: Optional[jax.Array]  # [L_moe, B, P, k]
    n_out: jax.Array  # [B] tokens generated (may exceed max_tokens by up to D)
    rounds: jax.Array  # scalar: loop iterations (target passes after prefill)
    drafted: jax.Array  # [B] draft tokens proposed
    accepted: jax.Array  # [B] draft tokens accepted


class _Loop(NamedTuple):
    """The device loop state."""

    caches: tuple
    mtp_caches: tuple
    h0_BWD: jax.Array  # h_0 at positions n−W..n−1 (W = 2D; [B, 0, D] without drafts)
    seq_BS: jax.Array  # committed tokens, then the current drafts at n+1..n+D
    n_B: jax.Array  # committed tokens minus one: the trunk has processed positions < n; x_n = seq[n]
    drafts_BD: jax.Array
    logq_BDV: jax.Array
    out: tuple  # (tokens, logprobs, policy, raw) each [B, Nb]
    route_BNLk: Optional[jax.Array]
    n_out_B: jax.Array
    done_B: jax.Array
    key: jax.Array
    rounds: jax.Array
    drafted_B: jax.Array
    accepted_B: jax.Array


# ------------------------------------------------------------------------------------------------- device program


def stop_hits(out_BN, ends_BK, ends_ok_BK, stops_ZL, stop_len_Z):
    """[B] bool: some stop sequence ends exactly at one of the new end indices of a row's output."""
    j_L = jnp.arange(stops_ZL.shape[1])
    start_BKZ = ends_BK[:, :, None] - stop_len_Z[None, None, :] + 1
    idx_BKZL = start_BKZ[..., None] + j_L
    got = jnp.take_along_axis(out_BN, jnp.clip(idx_BKZL, 0, out_BN.shape[1] - 1).reshape(out_BN.shape[0], -1), axis=1)
    match_BKZL = (got.reshape(idx_BKZL.shape) == stops_ZL[None, None]) | (j_L >= stop_len_Z[:, None])
    hit_BKZ = jnp.all(match_BKZL, axis=-1) & (start_BKZ >= 0) & ends_ok_BK[..., None] & (stop_len_Z > 0)
    return jnp.any(hit_BKZ, axis=(1, 2))


def _append(out, new, idx_BK, ok_BK):
    """Scatter new values [B, K] into buffers [B, Nb] at idx where ok (others dropped)."""
    nb = out.shape[1]
    rows_BK = jnp.broadcast_to(jnp.arange(out.shape[0])[:, None], idx_BK.shape)
    return out.at[rows_BK, jnp.where(ok_BK, idx_BK, nb)].set(new.astype(out.dtype), mode="drop")


class GenProgram(NamedTuple):
    """The static part of `generate_tokens` (each value compiles its own program)."""

    decoder: Decoder  # the model against caches: absorbed decode, the mesh MoE layers dispatch over
    warp: sampler.Warp
    max_tokens: int
    num_draft: int  # D: MTP depths drafting each round (0: plain decoding)
    prefill_chunk: Optional[int] = None  # query chunk of the prefill (None: the whole prompt in one pass)


class Prompts(NamedTuple):
    """A batch of right-padded prompts."""

    tokens: jax.Array  # [B, P] int32
    lengths: jax.Array  # [B] int32 (≥ 1)
    live: jax.Array  # [B] bool: real rows (the rest pad the batch and are done from the start)


class _Run(NamedTuple):
    """What every round reads."""

    variables: dict  # {params, router_state}
    sampling: speculative.Sampling
    stops: tuple  # (stop sequences [Z, L] padded with −1, their lengths [Z]; 0 = unused row)
    prog: GenProgram


class _Verdict(NamedTuple):
    """One round's target pass and acceptance."""

    logits: jax.Array  # [B, K, V] fp32
    logp: jax.Array  # [B, K, V] warped
    routing: Optional[jax.Array]  # [L_moe, B, K, k]
    accepted: jax.Array  # [B] drafts accepted
    next: jax.Array  # [B] the replacement or bonus token


def _emit(state: _Loop, v: _Verdict, run: _Run):
    """Commit a + 1 tokens per live row: output buffers, sequence, lengths, stop/length checks."""
    d = state.drafts_BD.shape[1]
    k_ar = jnp.arange(d + 1)
    emitted_BK = jnp.where(k_ar < v.accepted[:, None], jnp.pad(state.drafts_BD, ((0, 0), (0, 1))), v.next[:, None])
    count_B = jnp.where(state.done_B, 0, v.accepted + 1)
    ok_BK = k_ar < count_B[:, None]
    idx_BK = state.n_out_B[:, None] + k_ar
    policy_BK, raw_BK = sampler.full_logprobs(v.logits, emitted_BK, run.prog.warp, run.sampling.temperature)
    vals = (emitted_BK, sampler.token_logprob(v.logp, emitted_BK), policy_BK, raw_BK)
    out = tuple(_append(o, x, idx_BK, ok_BK) for o, x in zip(state.out, vals))
    route = state.route_BNLk
    if route is not None:
        r_BKLk = jnp.transpose(v.routing, (1, 2, 0, 3))
        rows_BK = jnp.broadcast_to(jnp.arange(route.shape[0])[:, None], idx_BK.shape)
        route = route.at[rows_BK, jnp.where(ok_BK, idx_BK, route.shape[1])].set(r_BKLk, mode="drop")
    rows_BK = jnp.broadcast_to(jnp.arange(state.seq_BS.shape[0])[:, None], ok_BK.shape)
    seq_pos_BK = jnp.where(ok_BK, state.n_B[:, None] + 1 + k_ar, state.seq_BS.shape[1])
    seq = state.seq_BS.at[rows_BK, seq_pos_BK].set(emitted_BK, mode="drop")
    n_out = state.n_out_B + count_B
    done = state.done_B | (n_out >= run.prog.max_tokens) | stop_hits(out[0], idx_BK, ok_BK, *run.stops)
    return state._replace(out=out, route_BNLk=route, seq_BS=seq, n_B=state.n_B + count_B, n_out_B=n_out, done_B=done,
                          drafted_B=state.drafted_B + jnp.where(state.done_B, 0, d),
                          accepted_B=state.accepted_B + jnp.where(state.done_B, 0, v.accepted))


def _round(state: _Loop, run: _Run):
    """One verify/decode pass of 1 + D tokens, acceptance, commit, then the next drafts."""
    dec = run.prog.decoder
    d = state.drafts_BD.shape[1]
    key, k_acc, k_draft = jax.random.split(state.key, 3)
    pos_BK = state.n_B[:, None] + jnp.arange(d + 1)
    tokens_BK = jnp.take_along_axis(state.seq_BS, jnp.clip(pos_BK, 0, state.seq_BS.shape[1] - 1), axis=1)
    tr = dec.trunk(run.variables, state.caches, Feed(tokens_BK, pos_BK, ~state.done_B[:, None] & (pos_BK >= 0)))
    logits_BKV = dec.logits(run.variables, tr.normed)
    logp_BKV = run.sampling.logp(logits_BKV)
    n_acc_B, next_B = speculative.accept(k_acc, logp_BKV, state.logq_BDV, state.drafts_BD)
    n_acc_B = jnp.where(state.done_B, 0, n_acc_B)
    count_B = jnp.where(state.done_B, 0, n_acc_B + 1)  # tokens this round commits
    state = _emit(state._replace(caches=tr.caches, key=key, rounds=state.rounds + 1),
                  _Verdict(logits_BKV, logp_BKV, tr.routing, n_acc_B, next_B), run)
    if d == 0:
        return state
    win = 2 * d
    both_BXD = jnp.concatenate([state.h0_BWD, tr.hidden], axis=1)  # positions n_old−W .. n_old+D
    h0_BWD = jnp.take_along_axis(both_BXD, (count_B[:, None] + jnp.arange(win))[..., None], axis=1)  # n−W .. n−1
    window = speculative.DraftWindow(h0_BWD, state.n_B[:, None] - win + jnp.arange(win), state.seq_BS, state.n_B)
    drafts, logq, mtp_caches, seq = speculative.draft(run.variables, state.mtp_caches, window, k_draft, run.sampling,
                                                      dec)
    return state._replace(h0_BWD=h0_BWD, drafts_BD=drafts, logq_BDV=logq, mtp_caches=mtp_caches, seq_BS=seq)


def prefill(variables: dict, caches: tuple, prompts: Prompts, dec: Decoder, chunk: Optional[int] = None) -> TrunkOut:
    """The prompt through the trunk in the expanded form (T large), writing its latents: in one pass, or with
    `chunk` < P in a scan over query chunks [B, chunk] against the whole cache (keys past a query are masked, as in
    one pass), so the attention scores live as [B, H, chunk, S] instead of [B, H, P, S]. Same positions computed,
    same outputs (hidden, normed, routing over all P positions); only the peak memory differs."""
    dec = dataclasses.replace(dec, absorb=False)
    b, p = prompts.tokens.shape
    len_B1 = prompts.lengths[:, None]
    if chunk is None or chunk >= p:
        pos_BP = jnp.broadcast_to(jnp.arange(p, dtype=jnp.int32), (b, p))
        return dec.trunk(variables, caches, Feed(prompts.tokens, pos_BP, pos_BP < len_B1))
    n = -(-p // chunk)
    tok_NBC = jnp.pad(prompts.tokens, ((0, 0), (0, n * chunk - p))).reshape(b, n, chunk).transpose(1, 0, 2)
    pos_NBC = jnp.broadcast_to(jnp.arange(n * chunk, dtype=jnp.int32).reshape(n, 1, chunk), (n, b, chunk))

    def one(caches, x):
        tok_BC, pos_BC = x
        tr = dec.trunk(variables, caches, Feed(tok_BC, pos_BC, pos_BC < len_B1))  # padding past P: never written
        return tr.caches, (tr.hidden, tr.normed, tr.routing)

    caches, (hid_NBCD, normed_NBCD, route_NLBCk) = jax.lax.scan(one, caches, (tok_NBC, pos_NBC))
    whole = lambda a_NBCD: a_NBCD.transpose(1, 0, 2, 3).reshape(b, n * chunk, -1)[:, :p]  # noqa: E731
    routing = None
    if route_NLBCk is not None:
        nl, k = route_NLBCk.shape[1], route_NLBCk.shape[-1]
        routing = route_NLBCk.transpose(1, 2, 0, 3, 4).reshape(nl, b, n * chunk, k)[:, :, :p]
    return TrunkOut(whole(hid_NBCD), whole(normed_NBCD), caches, routing)


def _first(tr: TrunkOut, prompts: Prompts, key, run: _Run):
    """The first token of every row, sampled at its last prompt position: (its four output values, routing [B,
    L_moe, k] or None)."""
    last_B = prompts.lengths - 1
    logits_BV = run.prog.decoder.logits(run.variables,
                                        jnp.take_along_axis(tr.normed, last_B[:, None, None], axis=1)[:, 0])
    logp_BV = run.sampling.logp(logits_BV)
    x_B = sampler.sample(key, logp_BV)
    policy_B, raw_B = sampler.full_logprobs(logits_BV, x_B, run.prog.warp, run.sampling.temperature)
    route = None
    if tr.routing is not None:
        route = jnp.take_along_axis(tr.routing, last_B[None, :, None, None], axis=2)[:, :, 0].transpose(1, 0, 2)
    return (x_B, sampler.token_logprob(logp_BV, x_B), policy_B, raw_B), route


@functools.partial(jax.jit, static_argnames=("prog",))
def generate_tokens(variables: dict, prompts: Prompts, key, temperature, top_p, stops, *,
                    prog: GenProgram) -> GenOut:
    """Prefill (in query chunks of `prog.prefill_chunk` when given), first token, (first drafts), then the device
    loop of rounds until every row is done (MoE layers expert-parallel over the decoder's mesh when given)."""
    run = _Run(variables, speculative.Sampling(prog.warp, temperature, top_p), stops, prog)
    cfg, d = prog.decoder.cfg, prog.num_draft
    b, p = prompts.tokens.shape
    s, nb = p + prog.max_tokens + d + 2, prog.max_tokens + d + 1
    dt = dtype_of(cfg.dtype)
    at = Placement.of(prog.decoder.mesh)
    tr = prefill(variables, kv_cache.init_cache(cfg, cfg.num_layers, b, s, dt, at), prompts, prog.decoder,
                 prog.prefill_chunk)
    key, k0, k_draft = jax.random.split(key, 3)
    first, r_BLk = _first(tr, prompts, k0, run)
    out = tuple(jnp.zeros((b, nb), v.dtype).at[:, 0].set(v) for v in first)
    route = None if r_BLk is None else jnp.zeros((b, nb) + r_BLk.shape[1:], jnp.int32).at[:, 0].set(r_BLk)
    seq_BS = jnp.zeros((b, s), jnp.int32).at[:, :p].set(prompts.tokens).at[jnp.arange(b), prompts.lengths].set(first[0])
    n_out = jnp.ones((b,), jnp.int32)
    done = ~prompts.live | (n_out >= prog.max_tokens) | stop_hits(out[0], jnp.zeros((b, 1), jnp.int32),
                                                                  jnp.ones((b, 1), bool), *stops)
    h0 = jnp.zeros((b, 0, cfg.hidden_size), dt)
    drafts, logq, mtp_caches = jnp.zeros((b, 0), jnp.int32), jnp.zeros((b, 0, cfg.vocab_size), jnp.float32), ()
    if d:
        win_BW = prompts.lengths[:, None] - 2 * d + jnp.arange(2 * d)
        h0 = jnp.take_along_axis(tr.hidden, jnp.clip(win_BW, 0, p - 1)[..., None], axis=1)
        pos_BP = jnp.broadcast_to(jnp.arange(p, dtype=jnp.int32), (b, p))
        window = speculative.DraftWindow(tr.hidden, pos_BP, seq_BS, prompts.lengths)
        mtp_fresh = kv_cache.init_cache(cfg, d, b, s, dt, at)
        drafts, logq, mtp_caches, seq_BS = speculative.draft(variables, mtp_fresh, window, k_draft, run.sampling,
                                                             prog.decoder)
    zeros_B = jnp.zeros((b,), jnp.int32)
    state = _Loop(tr.caches, mtp_caches, h0, seq_BS, prompts.lengths, drafts, logq, out, route, n_out, done, key,
                  jnp.zeros((), jnp.int32), zeros_B, zeros_B)
    state = jax.lax.while_loop(lambda st: ~jnp.all(st.done_B), lambda st: _round(st, run), state)
    return GenOut(*state.out, state.route_BNLk, tr.routing, state.n_out_B, state.rounds, state.drafted_B,
                  state.accepted_B)


# ------------------------------------------------------------------------------------------------- host API


def _bucket(n: int, step: int = 16) -> int:
    """n rounded up to a multiple of `step` (fewer distinct compiled shapes)."""
    return -(-n // step) * step


def _first_stop(tokens: Sequence[int], stops) -> Optional[int]:
    """Length of the output up to and including the first stop sequence, or None."""
    best = None
    for s in stops:
        for end in range(len(s), len(tokens) + 1):
            if tuple(tokens[end - len(s):end]) == s:
                best = end if best is None else min(best, end)
                break
    return best


def param_shardings(cfg: ModelConfig, mesh, rules=shd.LOGICAL_RULES):
    """NamedShardings of (params, router_state) from the logical axes the modules declare."""
    from composer2_jax.model import Transformer

    abstract = jax.eval_shape(lambda k: Transformer(cfg).init(k, jnp.zeros((1, 4), jnp.int32)), jax.random.key(0))
    sh = shd.logical_shardings(abstract, mesh, rules)
    return sh["params"], sh.get("router_state", {})


class Engine:
    """Batched generation with a latent KV cache; `num_draft` > 0 drafts with the first MTP depths (speculative)."""

    def __init__(self, cfg: ModelConfig, params, router_state, mesh=None, *, num_draft: int = 0,
                 absorb: bool = True, prefill_chunk: Optional[int] = None):
        if not 0 <= num_draft <= cfg.num_mtp_layers:
            raise ValueError(f"num_draft={num_draft} must lie in [0, model.num_mtp_layers={cfg.num_mtp_layers}]")
        if num_draft and "mtp" not in params:
            raise ValueError(f"num_draft={num_draft} needs MTP params (params['mtp']); the params have none")
        if prefill_chunk is not None and prefill_chunk < 1:
            raise ValueError(f"prefill_chunk={prefill_chunk} must be >= 1 (or None: the whole prompt in one pass)")
        self.cfg, self.mesh, self.num_draft, self.absorb = cfg, mesh, num_draft, absorb
        self.prefill_chunk = prefill_chunk  # query chunk of the prefill: bounds its [B, H, chunk, S] scores
        self.params, self.router_state = nn.unbox(params), nn.unbox(router_state or {})
        self.batch_multiple = 1
        if mesh is not None:
            p_sh, r_sh = param_shardings(cfg, mesh)
            if "mtp" not in self.params:
                p_sh = {k: v for k, v in p_sh.items() if k != "mtp"}
                r_sh = {k: v for k, v in r_sh.items() if k != "mtp"}
            self.params = jax.device_put(self.params, p_sh)
            self.router_state = jax.device_put(self.router_state, r_sh)
            self.batch_multiple = shd.axis_size(mesh, shd.mesh_axes_of("activation_batch"))
        self.stats: dict = {}

    def _inputs(self, prompts: Sequence[Sequence[int]], shape: Optional[tuple[int, int]] = None):
        """Right-padded prompts [B, P] (B padded to the mesh's batch multiple, or exactly `shape`), lengths, live."""
        if not prompts or any(len(q) == 0 for q in prompts):
            raise ValueError(f"every prompt needs at least one token; got lengths {[len(q) for q in prompts]}")
        bad = [t for q in prompts for t in q if not 0 <= t < self.cfg.vocab_size]
        if bad:
            raise ValueError(f"prompt token ids {bad[:5]} lie outside [0, vocab_size={self.cfg.vocab_size})")
        b, p = shape or (_bucket(len(prompts), self.batch_multiple), _bucket(max(len(q) for q in prompts)))
        if len(prompts) > b or max(len(q) for q in prompts) > p:
            raise ValueError(f"{len(prompts)} prompts of up to {max(len(q) for q in prompts)} tokens do not fit the "
                             f"fixed shape [rows={b}, prompt_len={p}]")
        tok = np.zeros((b, p), np.int32)
        lens = np.ones((b,), np.int32)
        for i, q in enumerate(prompts):
            tok[i, :len(q)], lens[i] = q, len(q)
        return tok, lens, np.arange(b) < len(prompts)

    def _run(self, tok, lens, live, sp: SamplingParams) -> GenOut:
        """The jitted program, under the mesh when there is one."""
        if sp.vocab_limit > self.cfg.vocab_size:
            raise ValueError(f"SamplingParams.vocab_limit={sp.vocab_limit} exceeds the model's vocab_size="
                             f"{self.cfg.vocab_size}")
        width = _bucket(max([len(s) for s in sp.stop], default=1), 4)  # buckets: fewer compiled shapes
        stops = np.full((_bucket(max(len(sp.stop), 1), 4), width), -1, np.int32)
        stop_len = np.zeros((stops.shape[0],), np.int32)  # length 0 = an unused row
        for i, s in enumerate(sp.stop):
            stops[i, :len(s)], stop_len[i] = s, len(s)
        variables = {"params": self.params, "router_state": self.router_state}
        prompts = Prompts(tok, lens, live)
        prog = GenProgram(Decoder(self.cfg, self.absorb, self.mesh), sp.warp(), sp.max_tokens, self.num_draft,
                          self.prefill_chunk)
        rest = (jax.random.key(sp.seed), jnp.float32(max(sp.temperature, 1e-6)), jnp.float32(sp.top_p),
                (stops, stop_len))
        if self.mesh is None:
            return generate_tokens(variables, prompts, *rest, prog=prog)
        with shd.activate(self.mesh):
            batch = jax.sharding.NamedSharding(self.mesh, shd.logical_to_spec(("activation_batch",)))
            return generate_tokens(variables, Prompts(*(jax.device_put(a, batch) for a in prompts)), *rest, prog=prog)

    def generate(self, prompts: Sequence[Sequence[int]], sp: SamplingParams = SamplingParams(),
                 shape: Optional[tuple[int, int]] = None) -> list[Completion]:
        """Generate one completion per prompt; `shape=(rows, prompt_len)` runs one fixed-shape program whatever the
        request mix (spare rows inert), so a serving loop compiles once."""
        tok, lens, live = self._inputs(prompts, shape)
        if tok.shape[1] + sp.max_tokens > self.cfg.max_position_embeddings:
            raise ValueError(f"padded prompt {tok.shape[1]} + max_tokens {sp.max_tokens} exceeds "
                             f"model.max_position_embeddings={self.cfg.max_position_embeddings}")
        g = jax.device_get(self._run(tok, lens, live, sp))
        n = len(prompts)
        drafted, accepted = int(g.drafted[:n].sum()), int(g.accepted[:n].sum())
        self.stats = dict(rounds=int(g.rounds), drafted=drafted, accepted=accepted,
                          acceptance=accepted / drafted if drafted else float("nan"),
                          generated=int(np.minimum(g.n_out[:n], sp.max_tokens).sum()))
        return [self._completion(g, i, int(lens[i]), sp) for i in range(n)]

    def _completion(self, g: GenOut, i: int, prompt_len: int, sp: SamplingParams) -> Completion:
        """Row i of the device output, cut at its first stop sequence or at max_tokens."""
        n = int(min(g.n_out[i], sp.max_tokens))
        tokens = [int(t) for t in g.tokens[i, :n]]
        end = _first_stop(tokens, sp.stop)
        reason = "stop" if end is not None else "length"
        n = end if end is not None else n
        routing = prompt_routing = None
        if g.routing is not None:
            routing = np.asarray(g.routing[i, :n], np.int32)
            prompt_routing = np.asarray(g.prompt_routing[:, i, :prompt_len - 1], np.int32).transpose(1, 0, 2)
        f = lambda a: [float(x) for x in a[i, :n]]  # noqa: E731
        return Completion(tokens[:n], f(g.logprobs), routing, reason, f(g.policy_logprobs), f(g.raw_logprobs),
                          prompt_routing)


def moe_layers(cfg: ModelConfig) -> int:
    """L_moe: the number of MoE layers a routing record covers."""
    return len(moe_layer_ids(cfg))
