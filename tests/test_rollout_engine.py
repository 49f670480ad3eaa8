"""The rollout engine against the static engine (full re-prefill of every turn's whole context): greedy multi-turn
sessions with a shared prefix, chunked prefill, continuous batching and preemption ≡ one-by-one generation token for
token (log-probs and router replay too); one compilation per program whatever the mix; a summary restart keeps the
common prefix; in-flight weight updates record versions and, under recompute, continue exactly as the new weights;
sharded (tensor=2, expert=2) ≡ unsharded."""

import jax
import numpy as np
import pytest

from composer2_jax import sharding as shd
from composer2_jax.infer import Engine, SamplingParams
from composer2_jax.infer.rollout_engine import EngineConfig, RolloutEngine
from composer2_jax.infer.step import TRACES
from composer2_jax.infer.testing import random_variables
from tests.test_infer import VOCAB, toy
from tests.tolerances import FP32_BLOCK, SHARDED_FP32

Y = 4  # page size of these tests


def _check_against_static(static: Engine, context: list, sp: SamplingParams, got):
    """The static engine's completion of the whole context; greedy tokens identical, log-probs and routing close."""
    want = static.generate([context], sp)[0]
    assert got.tokens == want.tokens and got.finish_reason == want.finish_reason
    np.testing.assert_allclose(got.policy_logprobs, want.policy_logprobs, **FP32_BLOCK)
    np.testing.assert_allclose(got.raw_logprobs, want.raw_logprobs, **FP32_BLOCK)
    np.testing.assert_array_equal(got.replay_routing(), want.replay_routing())


def test_multi_turn_sessions_match_static_engine_with_sharing_and_preemption():
    cfg, v = toy()
    r = np.random.default_rng(0)
    system = r.integers(0, VOCAB, 3 * Y + 1).tolist()  # a shared system prompt: 3 full pages, then 1 token
    n_sess, turns = 4, 3
    # a pool too small for all 4 sessions' contexts: preemption and recompute must happen
    ecfg = EngineConfig(slots=3, chunk=5, prefill_rows=2, page_size=Y, num_pages=24, max_len=64)
    eng = RolloutEngine(cfg, v["params"], v["router_state"], ecfg)
    static = Engine(cfg, v["params"], v["router_state"])
    stop = (int(r.integers(0, VOCAB)),)
    sids = [eng.open(system + r.integers(0, VOCAB, int(r.integers(1, 9))).tolist()) for _ in range(n_sess)]
    for turn in range(turns):
        sps = [SamplingParams(temperature=0.0, max_tokens=int(r.integers(2, 7)), stop=(stop,)) for _ in sids]
        contexts = [eng.tokens(s) for s in sids]
        futs = [eng.reply(s, sp) for s, sp in zip(sids, sps)]  # 4 replies, 3 slots: one waits for a free slot
        eng.run()
        for ctx, sp, f in zip(contexts, sps, futs):
            c = f.result()
            assert c.versions == [0] * len(c.tokens)
            _check_against_static(static, ctx, sp, c)
        for s in sids:  # a tool observation of 1..12 tokens
            eng.append(s, r.integers(0, VOCAB, int(r.integers(1, 13))).tolist())
    rep = eng.report()
    assert rep["preemptions"] > 0 and rep["adopted"] >= 3 * Y * (n_sess - 1), rep
    assert rep["prefill_programs"] > 0 and rep["decode_programs"] > 0
    assert rep["bytes_per_token"] == cfg.num_layers * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * 4  # fp32 toy
    assert 0 < rep["occupancy"] <= 1 and rep["referenced"] + rep["cached"] + rep["free"] == ecfg.num_pages


def test_resident_cache_prefills_only_new_tokens_and_compiles_once():
    cfg, v = toy()
    r = np.random.default_rng(1)
    ecfg = EngineConfig(slots=2, chunk=3, prefill_rows=1, page_size=Y, num_pages=64, max_len=96)  # shapes unique here
    eng = RolloutEngine(cfg, v["params"], v["router_state"], ecfg)
    before = sum(TRACES.values())
    sids = [eng.open(r.integers(0, VOCAB, n).tolist()) for n in (2, 11, 7)]
    sp = SamplingParams(temperature=0.0, max_tokens=4)
    for _ in range(3):  # turns of different mixes: 3 sessions on 2 slots, observations of varied lengths
        for s in sids:
            eng.reply(s, sp)
        eng.run()
        for s in sids:
            eng.append(s, r.integers(0, VOCAB, int(r.integers(1, 10))).tolist())
    assert sum(TRACES.values()) - before == 2  # one prefill program, one decode program
    for s in sids:  # each position computed once: every context token but the unfed last one
        sess = eng.sessions[s]
        assert sess.computed == sess.n_cached == len(sess.tokens) - (eng.tokens(s)[-1:] and sess.pending)


def test_summary_restart_keeps_the_common_prefix():
    cfg, v = toy()
    r = np.random.default_rng(2)
    eng = RolloutEngine(cfg, v["params"], v["router_state"], EngineConfig(slots=2, chunk=8, page_size=Y, num_pages=32,
                                                                         max_len=64))
    static = Engine(cfg, v["params"], v["router_state"])
    task = r.integers(0, VOCAB, 2 * Y + 2).tolist()
    s = eng.open(task + r.integers(0, VOCAB, 9).tolist())
    sp = SamplingParams(temperature=0.0, max_tokens=3)
    eng.reply(s, sp)
    eng.run()
    summary = task + r.integers(0, VOCAB, 5).tolist()  # system + task + summary: the first 2 pages still hold
    eng.set_context(s, summary)
    assert eng.sessions[s].n_cached == 2 * Y
    computed = eng.sessions[s].computed
    f = eng.reply(s, sp)
    eng.run()
    _check_against_static(static, summary, sp, f.result())
    assert eng.sessions[s].computed - computed == len(summary) - 2 * Y + 2  # the rest of the context + 2 replies
    head = task[:2 * Y]  # cut back to exactly the cached pages: the last token is fed again to reply
    eng.set_context(s, head)
    f = eng.reply(s, sp)
    eng.run()
    _check_against_static(static, head, sp, f.result())
    eng.end(s)
    with pytest.raises(KeyError, match="no open session"):
        eng.reply(s, sp)


@pytest.mark.parametrize("recompute", [False, True])
def test_in_flight_weight_update_records_versions(recompute):
    cfg, v = toy()
    v1 = random_variables(cfg, seed=7, head_scale=20.0)
    r = np.random.default_rng(3)
    eng = RolloutEngine(cfg, v["params"], v["router_state"], EngineConfig(
        slots=2, chunk=8, page_size=Y, num_pages=32, max_len=64, recompute_on_update=recompute))
    prompt = r.integers(0, VOCAB, 6).tolist()
    s = eng.open(prompt)
    sp = SamplingParams(temperature=0.0, max_tokens=8)
    f = eng.reply(s, sp)
    for _ in range(4):  # prefill + first token, then 3 decode steps: 4 tokens under version 0
        eng.step()
    eng.update_weights(v1["params"], v1["router_state"], version=1)  # no draining: the reply is mid-flight
    eng.run()
    c = f.result()
    assert c.versions == [0] * 4 + [1] * 4
    new = Engine(cfg, v1["params"], v1["router_state"]).generate([prompt + c.tokens[:4]],
                                                                 SamplingParams(temperature=0.0, max_tokens=4))[0]
    if recompute:  # the cached context was recomputed under the new weights: exactly their continuation
        assert c.tokens[4:] == new.tokens
        np.testing.assert_allclose(c.raw_logprobs[4:], new.raw_logprobs, **FP32_BLOCK)
    else:  # the kept cache was computed by version 0: a different (stale-context) continuation
        assert eng.sessions[s].cached_version[:len(prompt) + 3].tolist() == [0] * (len(prompt) + 3)
        assert not np.allclose(c.raw_logprobs[4:], new.raw_logprobs, **FP32_BLOCK)


def test_bad_requests_are_named():
    cfg, v = toy()
    ecfg = EngineConfig(slots=1, chunk=4, prefill_rows=1, page_size=Y, num_pages=4, max_len=16)
    eng = RolloutEngine(cfg, v["params"], v["router_state"], ecfg)
    with pytest.raises(ValueError, match="outside"):
        eng.open([VOCAB])
    s = eng.open([1, 2, 3])
    with pytest.raises(ValueError, match="max_len=16"):
        eng.reply(s, SamplingParams(max_tokens=14))
    eng.reply(s, SamplingParams(temperature=0.0, max_tokens=2))
    with pytest.raises(ValueError, match="generating a reply"):
        eng.append(s, [1])
    with pytest.raises(ValueError, match="multiple of page_size"):
        EngineConfig(page_size=16, max_len=20)


def test_sharded_engine_matches_unsharded():
    cfg, v = toy()
    mesh = shd.make_mesh(dict(data=1, fsdp=1, expert=2, tensor=2, context=1), devices=jax.devices()[:4])
    r = np.random.default_rng(4)
    ecfg = EngineConfig(slots=2, chunk=4, prefill_rows=2, page_size=Y, num_pages=16, max_len=32)
    ps = [r.integers(0, VOCAB, n).tolist() for n in (3, 9)]
    sp = SamplingParams(temperature=1.0, max_tokens=6, seed=1)
    outs = []
    for m in (None, mesh):
        eng = RolloutEngine(cfg, v["params"], v["router_state"], ecfg, mesh=m)
        futs = [eng.reply(eng.open(p), sp) for p in ps]
        eng.run()
        outs.append([f.result() for f in futs])
    assert eng.params["layers_0"]["attn"]["q_b_proj"].sharding.spec[1] == "tensor"
    for a, b in zip(*outs):
        assert a.tokens == b.tokens
        np.testing.assert_allclose(a.policy_logprobs, b.policy_logprobs, **SHARDED_FP32)
        np.testing.assert_array_equal(a.routing, b.routing)


def test_greedy_sessions_on_an_engine_of_its_own_devices_match_the_unsharded_engine():
    """An engine on devices[4:8] as (expert=2, tensor=2): multi-turn greedy sessions give the unsharded engine's
    tokens; behaviour log-probs within the sharded tolerance and the same routing records; weights, pool and
    programs stay on its four devices; suspend/resume (colocated time-sharing) recomputes the same contexts."""
    cfg, v = toy()
    devs = jax.devices()[4:8]
    mesh = shd.make_mesh(dict(data=1, fsdp=1, expert=2, tensor=2, context=1), devices=devs)
    r = np.random.default_rng(5)
    ecfg = EngineConfig(slots=2, chunk=4, prefill_rows=2, page_size=Y, num_pages=24, max_len=64)
    prompts = [r.integers(0, VOCAB, n).tolist() for n in (5, 10)]
    observations = [[r.integers(0, VOCAB, int(r.integers(1, 7))).tolist() for _ in prompts] for _ in range(2)]
    sp = SamplingParams(temperature=0.0, max_tokens=5)
    outs, engines = [], []
    for m in (None, mesh):
        eng = RolloutEngine(cfg, v["params"], v["router_state"], ecfg, mesh=m)
        sids = [eng.open(p) for p in prompts]
        turns = []
        for turn in range(3):
            futs = [eng.reply(s, sp) for s in sids]
            eng.step()
            if m is not None and turn == 1:  # mid-reply: the pool is freed and the contexts recomputed after
                eng.suspend()
                assert eng.suspended and all(eng.sessions[s].n_cached == 0 for s in sids)
                with pytest.raises(RuntimeError, match="suspended"):
                    eng.step()
                eng.resume()
            eng.run()
            turns.append([f.result() for f in futs])
            if turn < 2:
                for s, obs in zip(sids, observations[turn]):
                    eng.append(s, obs)
        outs.append(turns)
        engines.append(eng)
    sharded = engines[1]
    assert sharded.devices == devs
    for leaf in jax.tree.leaves((sharded.params, sharded.router_state, sharded._pools)):
        assert leaf.sharding.device_set == set(devs)
    assert sharded.params["stack"]["layer_0"]["moe"]["wi_gate"].sharding.spec[1] == "expert"
    assert sharded.stats["suspensions"] == 1 and sharded.stats["computed"] > engines[0].stats["computed"]
    for turn_a, turn_b in zip(*outs):
        for a, b in zip(turn_a, turn_b):
            assert a.tokens == b.tokens and len(a.tokens) == 5
            np.testing.assert_allclose(b.policy_logprobs, a.policy_logprobs, **SHARDED_FP32)
            np.testing.assert_allclose(b.raw_logprobs, a.raw_logprobs, **SHARDED_FP32)
            np.testing.assert_array_equal(b.replay_routing(), a.replay_routing())


def test_meshes_an_engine_cannot_use_are_named():
    cfg, v = toy()
    ecfg = EngineConfig(slots=2, chunk=4, prefill_rows=2, page_size=Y, num_pages=8, max_len=32)
    devs = jax.devices()
    cases = [(dict(tensor=8), devs, r"model.num_heads=4 is not divisible by mesh axes tensor=8"),
             (dict(expert=2, tensor=1, fsdp=1, data=1), devs[:2], None),
             (dict(fsdp=1, expert=1, context=2), devs[:2], r"context=2; expected 1"),
             (dict(fsdp=1, expert=3), devs[:3], r"model.n_routed_experts=8 is not divisible by mesh axes .*expert=3"),
             (dict(fsdp=1, expert=4), devs[:4], r"slots=2 and prefill_rows=2 must be multiples .* 4")]
    for axes, d, msg in cases:
        mesh = shd.make_mesh({**dict(data=1, fsdp=1, expert=1, tensor=1, context=1), **axes}, devices=d)
        if msg is None:
            RolloutEngine(cfg, v["params"], v["router_state"], ecfg, mesh=mesh)
            continue
        with pytest.raises(ValueError, match=msg):
            RolloutEngine(cfg, v["params"], v["router_state"], ecfg, mesh=mesh)
