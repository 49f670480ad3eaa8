"""Inference: absorbed latent attention ≡ expanded ≡ the training module, cached decode logits ≡ full forward (ragged
batch), sampling warps against numpy, the engine's logprobs / routing / stop sequences against a full forward, and
sharded decode (tensor=2, expert=2) ≡ unsharded."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn

from composer2_jax import sharding as shd
from composer2_jax.infer import Engine, SamplingParams, kv_cache, sampler
from composer2_jax.infer.testing import random_variables
from composer2_jax.model import Transformer
from composer2_jax.model.attention import CacheStep, MLAttention
from composer2_jax.model.decoding import Decoder, Feed
from composer2_jax.model.transformer import head_logits
from composer2_jax.model_config import get_model_config
from tests.tolerances import FP32_BLOCK, FP32_FN, SHARDED_FP32

VOCAB = 128


@functools.cache
def toy(num_mtp_layers: int = 2):
    """(cfg, variables): a toy MoE decoder (dense layer 0, MoE layer 1) with MTP depths; cached per process."""
    cfg = get_model_config("toy", num_layers=2, num_mtp_layers=num_mtp_layers, vocab_size=VOCAB)
    return cfg, random_variables(cfg, seed=0, head_scale=20.0)


def prompts(n: int, seed: int = 0, lo: int = 2, hi: int = 12) -> list[list[int]]:
    """n random prompts of ragged lengths in [lo, hi)."""
    r = np.random.default_rng(seed)
    return [r.integers(0, VOCAB, int(r.integers(lo, hi))).tolist() for _ in range(n)]


@functools.cache
def _full_apply(cfg):
    return jax.jit(lambda v, t: Transformer(cfg).apply(v, t))


def test_absorbed_attention_matches_expanded_and_the_module():
    cfg = get_model_config("toy")
    b, t = 2, 9
    x = jnp.asarray(np.random.default_rng(0).normal(size=(b, t, cfg.hidden_size)), jnp.float32)
    pos = jnp.broadcast_to(jnp.arange(t), (b, t))
    p = nn.unbox(jax.jit(MLAttention(cfg).init)(jax.random.key(1), x, pos))["params"]
    ref = jax.jit(MLAttention(cfg).apply)({"params": p}, x, pos)  # expanded K/V, the training path
    ones = jnp.ones((b, t), bool)
    cached = lambda c, x, pos, write, absorb=True: MLAttention(cfg).apply(  # noqa: E731
        {"params": p}, x, pos, cached=CacheStep(c, write, absorb))
    whole = jax.jit(lambda absorb: cached(kv_cache.init_cache(cfg, 1, b, 16, jnp.float32)[0], x, pos,
                                          ones, absorb)[0], static_argnums=0)
    for absorb in (True, False):  # whole sequence at once against the cache
        np.testing.assert_allclose(np.asarray(whole(absorb)), np.asarray(ref), **FP32_BLOCK)
    cache = kv_cache.init_cache(cfg, 1, b, 16, jnp.float32)[0]
    step = jax.jit(lambda c, xi, pi: cached(c, xi, pi, jnp.ones(pi.shape, bool), True))
    for i in range(t):  # token by token: latent-absorbed decode
        out, cache = step(cache, x[:, i:i + 1], pos[:, i:i + 1])
        np.testing.assert_allclose(np.asarray(out[:, 0]), np.asarray(ref[:, i]), **FP32_BLOCK)


def test_cached_decode_logits_match_full_forward_on_a_ragged_batch():
    cfg, v = toy()
    rows = prompts(3, seed=1, lo=14, hi=15)  # 14 tokens each; prefill ragged lengths 3, 6, 9, then decode
    tok = jnp.asarray(rows, jnp.int32)
    full = _full_apply(cfg)(v, tok)
    lens = jnp.asarray([3, 6, 9])
    caches = kv_cache.init_cache(cfg, cfg.num_layers, 3, 16, jnp.float32)

    @jax.jit
    def run(caches, tok_BT, pos_BT, write_BT):
        tr = Decoder(cfg).trunk(v, caches, Feed(tok_BT, pos_BT, write_BT))
        return tr.caches, head_logits(tr.normed, v["params"]["lm_head"], cfg), tr.routing

    pos = jnp.broadcast_to(jnp.arange(9), (3, 9))
    caches, logits, _ = run(caches, tok[:, :9], pos, pos < lens[:, None])  # prefill, padded to 9
    for r in range(3):
        np.testing.assert_allclose(np.asarray(logits[r, :lens[r]]), np.asarray(full.logits[r, :lens[r]]), **FP32_BLOCK)
    n = lens
    for _ in range(14 - 9):  # every row advances one token per step from its own length
        p1 = n[:, None]
        caches, logits, routing = run(caches, jnp.take_along_axis(tok, p1, 1), p1, jnp.ones((3, 1), bool))
        want = jnp.take_along_axis(full.logits, p1[..., None], 1)
        np.testing.assert_allclose(np.asarray(logits), np.asarray(want), **FP32_BLOCK)
        np.testing.assert_array_equal(np.asarray(routing[:, :, 0]),
                                      np.asarray(jnp.take_along_axis(full.routing, p1[None, :, :, None], 2)[:, :, 0]))
        n = n + 1


def _np_warp(logits, temperature, top_k, top_p):
    """Numpy reference of sampler.warp (sorting by hand)."""
    z = logits / temperature
    if top_k:
        z = np.where(z >= np.sort(z)[-top_k], z, -np.inf)
    p = np.exp(z - z.max())
    p /= p.sum()
    order = np.argsort(-p, kind="stable")
    keep, mass = np.zeros_like(p, bool), 0.0
    for i in order:
        if mass < top_p or not keep.any():
            keep[i] = True
        mass += p[i]
    p = np.where(keep, p, 0.0)
    return p / p.sum()


def test_sampling_warps_match_numpy():
    r = np.random.default_rng(0)
    logits = r.normal(size=(6, 10)).astype(np.float32) * 3
    for temperature, top_k, top_p in ((1.0, 0, 1.0), (0.7, 4, 1.0), (1.3, 0, 0.8), (0.5, 6, 0.6)):
        w = sampler.Warp(False, top_k, top_p < 1)
        got = np.exp(np.asarray(sampler.warp(jnp.asarray(logits), w, temperature, top_p)))
        for row in range(6):
            np.testing.assert_allclose(got[row], _np_warp(logits[row].astype(np.float64), temperature, top_k, top_p),
                                       **FP32_FN)
    greedy = np.asarray(sampler.warp(jnp.asarray(logits), sampler.Warp(True, 0, False), 1.0, 1.0))
    np.testing.assert_array_equal(np.argmax(greedy, -1), np.argmax(logits, -1))
    assert np.all(np.isneginf(greedy).sum(-1) == 9)


def test_vocab_limit_keeps_padded_ids_out_of_every_distribution():
    r = np.random.default_rng(1)
    logits = r.normal(size=(6, 10)).astype(np.float32) * 3
    logits[:, 7:] += 20.0  # the padded ids would dominate
    for temperature, top_k, top_p in ((1.0, 0, 1.0), (0.7, 3, 1.0), (1.3, 0, 0.8)):
        w = sampler.Warp(False, top_k, top_p < 1, vocab_limit=7)
        got = np.exp(np.asarray(sampler.warp(jnp.asarray(logits), w, temperature, top_p)))
        assert np.all(got[:, 7:] == 0)
        for row in range(6):
            np.testing.assert_allclose(got[row, :7], _np_warp(logits[row, :7].astype(np.float64), temperature, top_k,
                                                              top_p), **FP32_FN)
        tokens = jnp.arange(6) % 7
        policy, raw = sampler.full_logprobs(jnp.asarray(logits), tokens, w, temperature)
        np.testing.assert_allclose(policy, np.asarray(jax.nn.log_softmax(logits[:, :7] / temperature))[
            np.arange(6), np.asarray(tokens)], **FP32_FN)
        np.testing.assert_allclose(raw, np.asarray(jax.nn.log_softmax(logits[:, :7]))[np.arange(6), np.asarray(tokens)],
                                   **FP32_FN)
    greedy = np.asarray(sampler.warp(jnp.asarray(logits), sampler.Warp(True, 0, False, 7), 1.0, 1.0))
    np.testing.assert_array_equal(np.argmax(greedy, -1), np.argmax(logits[:, :7], -1))
    cfg, v = toy(num_mtp_layers=2)
    engine = Engine(cfg, v["params"], v["router_state"], num_draft=2)  # drafts use the same limited distribution
    limit = 40
    for sp in (SamplingParams(temperature=1.0, max_tokens=16, seed=5, vocab_limit=limit),
               SamplingParams(temperature=0.0, max_tokens=16, vocab_limit=limit)):
        outs = engine.generate(prompts(6, seed=4), sp)
        assert max(t for o in outs for t in o.tokens) < limit
    free = engine.generate(prompts(6, seed=4), SamplingParams(temperature=1.0, max_tokens=16, seed=5))
    assert max(t for o in free for t in o.tokens) >= limit  # the control: unlimited sampling does reach them
    with pytest.raises(ValueError, match="vocab_limit=129 exceeds the model's vocab_size=128"):
        engine.generate([[1, 2]], SamplingParams(vocab_limit=VOCAB + 1))
    with pytest.raises(ValueError, match="vocab_limit must be >= 0"):
        SamplingParams(vocab_limit=-1)


def test_engine_logprobs_routing_stops_against_full_forward():
    cfg, v = toy()
    engine = Engine(cfg, v["params"], v["router_state"])
    ps = prompts(5, seed=2)
    sp = SamplingParams(temperature=0.8, top_k=20, max_tokens=12, seed=3)
    outs = engine.generate(ps, sp)
    seqs = [q + o.tokens[:-1] for q, o in zip(ps, outs)]
    width = max(map(len, seqs))
    full = _full_apply(cfg)(v, jnp.asarray([s + [0] * (width - len(s)) for s in seqs]))  # right pad: causal
    for r, (q, o) in enumerate(zip(ps, outs)):
        assert o.finish_reason == "length" and len(o.tokens) == 12
        logits = full.logits[r, len(q) - 1:len(q) + 11]
        tok = jnp.asarray(o.tokens)
        lp = jax.nn.log_softmax(logits)
        np.testing.assert_allclose(o.raw_logprobs, np.asarray(lp[jnp.arange(12), tok]), **FP32_BLOCK)
        warped = sampler.warp(logits, sp.warp(), sp.temperature, sp.top_p)
        np.testing.assert_allclose(o.logprobs, np.asarray(warped[jnp.arange(12), tok]), **FP32_BLOCK)
        pol = jax.nn.log_softmax(logits / sp.temperature)
        np.testing.assert_allclose(o.policy_logprobs, np.asarray(pol[jnp.arange(12), tok]), **FP32_BLOCK)
        replay = o.replay_routing()  # the router-replay record lines up with the trainer's input tokens
        np.testing.assert_array_equal(replay, np.asarray(full.routing[:, r, :replay.shape[1]]))
    again = engine.generate(ps, sp)
    assert [o.tokens for o in again] == [o.tokens for o in outs]  # same seed, same tokens
    stop = tuple(outs[0].tokens[3:5])  # a 2-token stop sequence that row 0 is known to emit at positions 3..4
    stops = (stop, (VOCAB - 1,))
    cut = engine.generate(ps, SamplingParams(temperature=0.8, top_k=20, max_tokens=12, seed=3, stop=stops))
    assert cut[0].finish_reason == "stop" and len(cut[0].tokens) <= 5
    assert len(cut[0].logprobs) == len(cut[0].routing) == len(cut[0].tokens)
    for a, b in zip(cut, outs):  # same seed and compiled shapes: identical up to the first stop, cut after it
        ends = [i + len(s) for s in stops for i in range(len(b.tokens) - len(s) + 1)
                if tuple(b.tokens[i:i + len(s)]) == s]
        end = min(ends, default=None)
        assert a.tokens == b.tokens[:end] and a.finish_reason == ("stop" if ends else "length")
    with pytest.raises(ValueError, match="at least one token"):
        engine.generate([[1], []], sp)


def test_chunked_prefill_matches_one_pass():
    """Engine(prefill_chunk=c): the prompt in query chunks against the whole cache — the same tokens, logprobs and
    prompt routing as one pass, for a chunk that divides the padded prompt and one that leaves a padded tail, with
    and without MTP drafts."""
    cfg, v = toy()
    ps = prompts(4, seed=5, lo=20, hi=45)  # padded to P = 48
    sp = SamplingParams(temperature=0.8, max_tokens=6, seed=2)
    for d in (0, 1):
        ref = Engine(cfg, v["params"], v["router_state"], num_draft=d).generate(ps, sp)
        for chunk in (16, 7):
            outs = Engine(cfg, v["params"], v["router_state"], num_draft=d, prefill_chunk=chunk).generate(ps, sp)
            for a, b in zip(outs, ref):
                assert a.tokens == b.tokens
                np.testing.assert_allclose(a.logprobs, b.logprobs, **FP32_BLOCK)
                np.testing.assert_array_equal(a.replay_routing(), b.replay_routing())
    with pytest.raises(ValueError, match="prefill_chunk"):
        Engine(cfg, v["params"], v["router_state"], prefill_chunk=0)


def test_sharded_decode_matches_unsharded():
    cfg, v = toy()
    mesh = shd.make_mesh(dict(data=1, fsdp=1, expert=2, tensor=2, context=1), devices=jax.devices()[:4])
    ps = prompts(3, seed=4)  # 3 rows: padded to the batch multiple 2 with an inert row
    sp = SamplingParams(temperature=1.0, max_tokens=8, seed=1)  # sampled, speculative: trunk + MTP + acceptance
    ref = Engine(cfg, v["params"], v["router_state"], num_draft=1).generate(ps, sp)
    sharded = Engine(cfg, v["params"], v["router_state"], mesh, num_draft=1)
    wq = sharded.params["layers_0"]["attn"]["q_b_proj"]
    assert len(wq.sharding.device_set) == 4 and wq.sharding.spec[1] == "tensor"
    assert sharded.params["stack"]["layer_0"]["moe"]["wi_gate"].sharding.spec[1] == "expert"
    got = sharded.generate(ps, sp)
    for a, b in zip(ref, got):
        assert a.tokens == b.tokens
        np.testing.assert_allclose(a.policy_logprobs, b.policy_logprobs, **SHARDED_FP32)
        np.testing.assert_array_equal(a.routing, b.routing)
