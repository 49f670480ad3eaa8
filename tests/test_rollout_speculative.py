"""MTP speculative decoding inside the rollout engine's continuous batching: greedy multi-turn sessions (shared
prefix, chunked prefill, preemption, appends, an in-flight weight update) give the same tokens, log-probs, routing and
versions with num_draft = 0, 1, 2, each engine compiling its two programs once; every draft equals the full-sequence
MTP forward's (the paged MTP caches stay exact across turns and rollbacks); and sampling keeps the target law
exactly (the chi-square test of tests/test_speculative.py, run against the rollout engine)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from composer2_jax.infer import SamplingParams
from composer2_jax.infer.rollout_engine import EngineConfig, RolloutEngine
from composer2_jax.infer.step import TRACES
from composer2_jax.infer.testing import random_variables
from composer2_jax.model import Transformer
from composer2_jax.model.mtp import mtp_batch
from composer2_jax.model.transformer import head_logits
from composer2_jax.model_config import get_model_config
from tests.test_infer import VOCAB, toy
from tests.test_speculative import _echo_drafter, _exact_joint, chi2_pvalue
from tests.tolerances import FP32_BLOCK

Y = 4  # page size of these tests


def _multi_turn(v, cfg, num_draft: int, r_seed: int = 0):
    """Four greedy sessions sharing a system prompt over three slots, three turns with observations, weights
    swapped (same values, version 1) before the last turn; a pool small enough to preempt. (completions, report)."""
    r = np.random.default_rng(r_seed)
    system = r.integers(0, VOCAB, 3 * Y + 1).tolist()
    ecfg = EngineConfig(slots=3, chunk=5, prefill_rows=2, page_size=Y, num_pages=44, max_len=96, num_draft=num_draft)
    eng = RolloutEngine(cfg, v["params"], v["router_state"], ecfg)
    before = sum(TRACES.values())
    sids = [eng.open(system + r.integers(0, VOCAB, int(r.integers(1, 9))).tolist()) for _ in range(4)]
    outs = []
    for turn in range(3):
        if turn == 2:
            eng.update_weights(v["params"], v["router_state"], version=1)
        futs = [eng.reply(s, SamplingParams(temperature=0.0, max_tokens=int(r.integers(5, 10)))) for s in sids]
        eng.run()
        outs.append([f.result() for f in futs])
        for s in sids:
            eng.append(s, r.integers(0, VOCAB, int(r.integers(1, 13))).tolist())
    assert sum(TRACES.values()) - before == 2  # one prefill program, one (drafting) decode program
    return outs, eng.report()


@functools.cache
def _plain_reference():
    cfg, v = toy()
    v = _echo_drafter(cfg, v)
    plain, rep0 = _multi_turn(v, cfg, 0)
    assert rep0["acceptance"] is None and rep0["preemptions"] > 0
    return cfg, v, plain, rep0


@pytest.mark.parametrize("d", [2, pytest.param(1, marks=pytest.mark.slow)])
def test_greedy_drafting_matches_plain_decoding_across_turns(d):
    cfg, v, plain, rep0 = _plain_reference()
    got, rep = _multi_turn(v, cfg, d)
    for turn, (want_t, got_t) in enumerate(zip(plain, got)):
        for want, c in zip(want_t, got_t):
            assert c.tokens == want.tokens and c.finish_reason == want.finish_reason
            assert c.versions == [int(turn == 2)] * len(c.tokens)
            np.testing.assert_allclose(c.policy_logprobs, want.policy_logprobs, **FP32_BLOCK)
            np.testing.assert_allclose(c.raw_logprobs, want.raw_logprobs, **FP32_BLOCK)
            np.testing.assert_array_equal(c.replay_routing(), want.replay_routing())
    assert 0 < rep["accepted"] < rep["drafted"], rep  # both acceptance branches occur
    assert rep["acceptance"] == rep["accepted"] / rep["drafted"]
    assert rep["generated"] == rep0["generated"] and rep["preemptions"] > 0


def test_drafts_equal_the_full_mtp_forward_across_turns():
    """Every drafted token (greedy) is the argmax of the full-sequence MTP forward over the committed context plus
    the earlier depths' drafts: the paged MTP caches are exact after prefill chunks, rollbacks and appends."""
    cfg, v = toy()
    v = _echo_drafter(cfg, v)
    r = np.random.default_rng(1)
    d = 2
    eng = RolloutEngine(cfg, v["params"], v["router_state"], EngineConfig(
        slots=2, chunk=5, prefill_rows=1, page_size=Y, num_pages=64, max_len=96, num_draft=d))
    seen = []
    commit = eng._commit_drafted

    def record(s, out, i):
        seen.append((list(s.tokens), [int(x) for x in out.drafts[i]]))
        commit(s, out, i)

    eng._commit_drafted = record
    sids = [eng.open(r.integers(0, VOCAB, n).tolist()) for n in (7, 12)]
    for _ in range(2):
        for s in sids:
            eng.reply(s, SamplingParams(temperature=0.0, max_tokens=8))
        eng.run()
        for s in sids:
            eng.append(s, r.integers(0, VOCAB, 6).tolist())
    full = jax.jit(lambda t, mt: Transformer(cfg).apply(v, t, mtp_tokens=mt))
    assert len(seen) >= 16
    for ctx, drafts in seen:  # padded to one length (causal: later tokens change nothing at n − 1): one compilation
        seq = jnp.asarray([ctx + drafts + [0] * (96 - len(ctx) - d)])
        mt = mtp_batch(dict(tokens=seq, targets=seq, loss_mask=jnp.ones(seq.shape, jnp.int32)), d)["mtp_tokens"]
        out = full(seq, mt)
        n = len(ctx) - 1  # x_n is the last committed token; depth k's query at n − 1 drafts x̂_{n+k}
        want = [int(jnp.argmax(head_logits(out.mtp.normed[m, 0, n - 1], v["params"]["lm_head"], cfg)))
                for m in range(d)]
        assert drafts == want, (n, drafts, want)


def test_drafting_sampling_preserves_the_target_distribution():
    cfg = get_model_config("toy", vocab_size=8, num_layers=1, num_mtp_layers=2, n_routed_experts=0,
                           hidden_size=32, intermediate_size=64, num_heads=2, q_lora_rank=None, kv_lora_rank=16)
    v = random_variables(cfg, seed=1, head_scale=10.0)
    prompt, n_tok, n, batch = [1, 5, 2], 3, 16384, 2048
    sp = SamplingParams(temperature=0.9, top_k=6, top_p=0.95, max_tokens=n_tok, seed=11)
    joint = _exact_joint(cfg, v, prompt, sp, n_tok)
    eng = RolloutEngine(cfg, v["params"], v["router_state"], EngineConfig(
        slots=batch, chunk=4, prefill_rows=batch, page_size=Y, num_pages=3 * batch, max_len=16,
        max_sessions=batch, num_draft=2))
    tokens = []
    for _ in range(n // batch):  # sessions of their own (independent keys), ended after their reply
        sids = [eng.open(prompt) for _ in range(batch)]
        futs = [eng.reply(s, sp) for s in sids]
        eng.run()
        tokens += [f.result().tokens for f in futs]
        for s in sids:
            eng.end(s)
    assert 0.05 < eng.report()["acceptance"] < 0.95  # both branches of the acceptance rule are exercised
    idx = np.ravel_multi_index(np.array(tokens).T, (cfg.vocab_size,) * n_tok)
    counts = np.bincount(idx, minlength=joint.size)
    assert counts[joint == 0].sum() == 0  # nothing outside the top-k / top-p support
    assert chi2_pvalue(counts, joint) > 1e-3
    assert 0.5 * np.abs(counts / n - joint).sum() < 0.03
    # the same test has power: a slightly different temperature is rejected
    other = _exact_joint(cfg, v, prompt, SamplingParams(temperature=1.1, top_k=6, top_p=0.95), n_tok)
    assert chi2_pvalue(counts, other) < 1e-6


def test_bad_num_draft_is_named():
    cfg, v = toy(num_mtp_layers=2)
    with pytest.raises(ValueError, match="num_draft=3 exceeds model.num_mtp_layers=2"):
        RolloutEngine(cfg, v["params"], v["router_state"], EngineConfig(num_draft=3, max_len=64))
    with pytest.raises(ValueError, match="num_draft must be ≥ 0"):
        EngineConfig(num_draft=-1)
