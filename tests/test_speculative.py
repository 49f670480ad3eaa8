"""Speculative decoding with MTP drafts: the acceptance rule's output law, drafts ≡ a full MTP forward across rounds
(the windowed draft caches), greedy speculative ≡ plain decoding, and sampling that preserves the target
distribution (exact joint law of 3 tokens on a vocabulary of 8, chi-square over vectorised samples)."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from composer2_jax.infer import Engine, SamplingParams, kv_cache, sampler, speculative
from composer2_jax.infer.testing import random_variables
from composer2_jax.model import Transformer
from composer2_jax.model.decoding import Decoder
from composer2_jax.model.mtp import mtp_batch
from composer2_jax.model.transformer import head_logits
from composer2_jax.model_config import get_model_config
from tests.test_infer import prompts, toy
from tests.tolerances import FP32_BLOCK


def test_accept_rule_emits_the_target_distribution():
    """One draft from q, rejection sampling against p: the first emitted token is distributed as p exactly."""
    r = np.random.default_rng(0)
    p = r.dirichlet(np.ones(5) * 0.7, size=3)
    q = r.dirichlet(np.ones(5) * 0.7, size=3)
    n = 200_000
    key_d, key_a = jax.random.split(jax.random.key(0))
    logp = jnp.log(jnp.asarray(np.repeat(p, n, 0), jnp.float32))[:, None].repeat(2, 1)  # [3n, D+1=2, V]
    logq = jnp.log(jnp.asarray(np.repeat(q, n, 0), jnp.float32))[:, None]  # [3n, 1, V]
    drafts = jax.random.categorical(key_d, logq[:, 0])[:, None]
    n_acc, nxt = jax.jit(speculative.accept)(key_a, logp, logq, drafts)
    first = np.where(np.asarray(n_acc) > 0, np.asarray(drafts[:, 0]), np.asarray(nxt)).reshape(3, n)
    for i in range(3):
        freq = np.bincount(first[i], minlength=5) / n
        np.testing.assert_allclose(freq, p[i], atol=4e-3)
        assert abs(np.asarray(n_acc).reshape(3, n)[i].mean() - np.minimum(p[i], q[i]).sum()) < 4e-3  # α = 1 − TV


def test_drafts_match_a_full_mtp_forward_across_rounds():
    """After prefill and rounds that commit 1..D+1 tokens (accepted or not), each depth's draft distribution equals
    the full-sequence MTP forward on committed tokens + the earlier drafts: the recomputed window keeps the caches
    exact."""
    cfg, v = toy()
    d, win, b, s = 2, 4, 2, 40
    r = np.random.default_rng(3)
    seq = r.integers(0, cfg.vocab_size, (b, s)).astype(np.int32)
    w = sampler.Warp(False, 0, False)
    full = jax.jit(lambda t, mt: Transformer(cfg).apply(v, t, mtp_tokens=mt))
    mt = mtp_batch(dict(tokens=jnp.asarray(seq), targets=jnp.asarray(seq), loss_mask=jnp.ones((b, s), jnp.int32)),
                   2)["mtp_tokens"]
    hid = full(jnp.asarray(seq), mt).hidden
    drafter = jax.jit(lambda c, h, pos, sq, n: speculative.draft(v, c, speculative.DraftWindow(h, pos, sq, n),
                                                                 jax.random.key(0), speculative.Sampling(w, 1.0, 1.0),
                                                                 Decoder(cfg)))
    n = np.array([6, 9])  # committed: positions < n processed by the trunk, x_n sampled
    pos0 = jnp.broadcast_to(jnp.arange(12), (b, 12))
    caches = kv_cache.init_cache(cfg, d, b, s, jnp.float32)
    _, logq, caches, sq = drafter(caches, hid[:, :12], pos0, jnp.asarray(seq), jnp.asarray(n))
    for commit in ([3, 1], [1, 3], [2, 2], [3, 3]):
        seq = np.array(sq)
        for row in range(b):  # commit tokens: the drafts, then one resampled token — simulated by fresh random ids
            seq[row, n[row] + 1:n[row] + 1 + commit[row]] = r.integers(0, cfg.vocab_size, commit[row])
        n = n + np.asarray(commit)
        ref = full(jnp.asarray(seq), mt).hidden  # the trunk's h_0 (causal: later tokens do not matter)
        block = n[:, None] - win + np.arange(win)
        h0 = jnp.take_along_axis(ref, jnp.asarray(block)[..., None], axis=1)
        drafts, logq, caches, sq = drafter(caches, h0, jnp.asarray(block), jnp.asarray(seq), jnp.asarray(n))
        want = np.array(sq)  # committed tokens + the drafts the MTP depths just wrote at n+1, n+2
        mt = mtp_batch(dict(tokens=jnp.asarray(want), targets=jnp.asarray(want),
                            loss_mask=jnp.ones((b, s), jnp.int32)), 2)["mtp_tokens"]
        out = full(jnp.asarray(want), mt)
        for m in range(d):
            logits = head_logits(out.mtp.normed[m, jnp.arange(b), n - 1], v["params"]["lm_head"], cfg)
            np.testing.assert_allclose(np.asarray(logq[:, m]), np.asarray(jax.nn.log_softmax(logits)), **FP32_BLOCK)


def _echo_drafter(cfg, v):
    """Variables whose MTP depths start from hnorm(h_{k−1}) alone (eh_proj = [0; I]): the blocks then add small
    random updates, so the drafts mostly repeat the main head's previous argmax — accepted in greedy loops."""
    d = cfg.hidden_size
    eh = jnp.concatenate([jnp.zeros((d, d)), jnp.eye(d)])
    mtp = {m: dict(p, eh_proj=eh) for m, p in v["params"]["mtp"].items()}
    return dict(v, params=dict(v["params"], mtp=mtp))


def test_greedy_speculative_matches_plain_decoding_on_16_prompts():
    cfg, v = toy()
    v = _echo_drafter(cfg, v)
    ps = prompts(16, seed=5)
    sp = SamplingParams(temperature=0.0, max_tokens=24)
    plain = Engine(cfg, v["params"], v["router_state"]).generate(ps, sp)
    spec_engine = Engine(cfg, v["params"], v["router_state"], num_draft=2)
    spec = spec_engine.generate(ps, sp)
    assert [o.tokens for o in spec] == [o.tokens for o in plain]
    for a, b in zip(plain, spec):
        np.testing.assert_allclose(a.raw_logprobs, b.raw_logprobs, **FP32_BLOCK)
        np.testing.assert_array_equal(a.routing, b.routing)
    st = spec_engine.stats
    assert 0.1 < st["acceptance"] < 0.9, st  # accepted and rejected drafts both occur


def _exact_joint(cfg, v, prompt, sp, n_tok):
    """Exact probability of every n_tok-token continuation under the warped target, by enumeration: [V]*n_tok."""
    vocab = cfg.vocab_size
    prefixes = np.array(list(itertools.product(range(vocab), repeat=n_tok - 1)), np.int32).reshape(-1, n_tok - 1)
    tok = np.concatenate([np.tile(prompt, (len(prefixes), 1)), prefixes], 1)
    logits = jax.jit(Transformer(cfg).apply)(v, jnp.asarray(tok)).logits[:, len(prompt) - 1:]  # [V^(n-1), n, V]
    p = np.exp(np.asarray(sampler.warp(logits, sp.warp(), sp.temperature, sp.top_p), np.float64))
    joint = np.ones((vocab,) * n_tok)
    for idx in itertools.product(range(vocab), repeat=n_tok):
        row = int(np.ravel_multi_index(idx[:-1], (vocab,) * (n_tok - 1))) if n_tok > 1 else 0
        joint[idx] = np.prod([p[row, j, idx[j]] for j in range(n_tok)])
    return joint.reshape(-1)


def chi2_pvalue(counts, expected_p):
    """Chi-square p-value of the sample counts against a law (cells expecting < 5 samples pooled into one)."""
    n = counts.sum()
    big = expected_p * n >= 5
    obs = np.r_[counts[big], counts[~big].sum()]
    exp = np.r_[expected_p[big], expected_p[~big].sum()] * n
    keep = exp > 0
    return stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue


def test_speculative_sampling_preserves_the_target_distribution():
    cfg = get_model_config("toy", vocab_size=8, num_layers=1, num_mtp_layers=2, n_routed_experts=0,
                           hidden_size=32, intermediate_size=64, num_heads=2, q_lora_rank=None, kv_lora_rank=16)
    v = random_variables(cfg, seed=1, head_scale=10.0)  # ~97 likely 3-token continuations; drafts differ
    prompt, n_tok, n = [1, 5, 2], 3, 16384
    sp = SamplingParams(temperature=0.9, top_k=6, top_p=0.95, max_tokens=n_tok, seed=11)
    joint = _exact_joint(cfg, v, prompt, sp, n_tok)
    engine = Engine(cfg, v["params"], v["router_state"], num_draft=2)
    outs = engine.generate([prompt] * n, sp)
    assert 0.05 < engine.stats["acceptance"] < 0.95  # both branches of the acceptance rule are exercised
    idx = np.ravel_multi_index(np.array([o.tokens for o in outs]).T, (cfg.vocab_size,) * n_tok)
    counts = np.bincount(idx, minlength=joint.size)
    assert counts[joint == 0].sum() == 0  # nothing outside the top-k / top-p support
    assert chi2_pvalue(counts, joint) > 1e-3
    tv = 0.5 * np.abs(counts / n - joint).sum()
    assert tv < 0.03, tv
    # the same test has power: a slightly different temperature is rejected
    other = _exact_joint(cfg, v, prompt, SamplingParams(temperature=1.1, top_k=6, top_p=0.95), n_tok)
    assert chi2_pvalue(counts, other) < 1e-6
