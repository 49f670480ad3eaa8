"""Multi-token prediction: token shifts (segments, positions, zigzag), the chunked CE/self-distillation loss against a
naive per-position loop, no future leakage through gradients, packed ≡ separate, detaching the trunk, the λ
schedule, parameter names shared with the HF converter, and the train step with MTP on."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from composer2_jax.infer.testing import random_variables
from composer2_jax.losses.mtp import MTPLossConfig, chunked_mtp_sums, mtp_weight, teacher_hidden
from composer2_jax.model import Transformer
from composer2_jax.model.mtp import mtp_batch, shift_left, shift_tokens
from composer2_jax.model_config import get_model_config
from tests.tolerances import FP32_BLOCK, FP32_FN

VOCAB = 64


def _cfg(**kw):
    """A one-layer dense trunk with two MoE MTP depths (DeepSeek's rule puts MoE at absolute layers 1 and 2)."""
    base = dict(num_layers=1, num_mtp_layers=2, vocab_size=VOCAB)
    return get_model_config("toy", **dict(base, **kw))


def _packed_batch():
    """Two rows: row 0 packs documents of 5 and 6 tokens then 3 pads; row 1 is one 14-token document."""
    r = np.random.default_rng(0)
    tok = r.integers(1, VOCAB, (2, 14)).astype(np.int32)
    tgt = r.integers(1, VOCAB, (2, 14)).astype(np.int32)
    seg = np.array([[1] * 5 + [2] * 6 + [0] * 3, [1] * 14], np.int32)
    pos = np.array([list(range(5)) + list(range(6)) + [0, 1, 2], list(range(14))], np.int32)
    mask = (seg > 0).astype(np.int32)
    mask[1, 3] = 0  # one unlearned target inside a document
    return dict(tokens=tok, targets=tgt, loss_mask=mask, segment_ids=seg, positions=pos)


def test_shift_tokens_respects_segments_positions_and_row_end():
    b = _packed_batch()
    tok, valid = shift_tokens(jnp.asarray(b["tokens"]), 2, jnp.asarray(b["segment_ids"]), jnp.asarray(b["positions"]))
    expect_valid = np.zeros((2, 14), bool)
    expect_valid[0, [0, 1, 2, 5, 6, 7, 8]] = True  # doc 1: i+2 ≤ 4; doc 2: i+2 ≤ 10; pads never
    expect_valid[1, :12] = True
    np.testing.assert_array_equal(np.asarray(valid), expect_valid)
    np.testing.assert_array_equal(np.asarray(tok)[expect_valid], np.roll(b["tokens"], -2, axis=1)[expect_valid])
    assert np.all(np.asarray(tok)[~expect_valid] == 0)
    mb = mtp_batch({k: jnp.asarray(v) for k, v in b.items()}, 2)
    assert mb["mtp_tokens"].shape == (2, 14, 2)
    np.testing.assert_array_equal(np.asarray(mb["mtp_mask"][1, :, 0])[:13], np.r_[b["loss_mask"][1, 1:]])


def test_shift_composes_with_zigzag():
    """On a zigzagged batch, `context=n` shifts in natural order and returns zigzagged arrays (shift, then zigzag)."""
    from composer2_jax.model.context_parallel import zigzag, zigzag_batch

    r = np.random.default_rng(1)
    t = 16
    nat = dict(tokens=r.integers(1, VOCAB, (2, t)), targets=r.integers(1, VOCAB, (2, t)),
               loss_mask=np.ones((2, t), np.int32), segment_ids=np.repeat([[1] * 9 + [2] * 7], 2, 0),
               positions=np.repeat([list(range(9)) + list(range(7))], 2, 0))
    nat = {k: jnp.asarray(v, jnp.int32) for k, v in nat.items()}
    expected = zigzag_batch(mtp_batch(nat, 3), 2)
    got = mtp_batch(zigzag_batch(nat, 2), 3, context=2)
    for k in expected:
        np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(expected[k]))
    x = jnp.asarray(r.normal(size=(2, t, 4)), jnp.float32)
    np.testing.assert_array_equal(np.asarray(shift_left(zigzag(x, 2), 3, context=2)),
                                  np.asarray(zigzag(shift_left(x, 3), 2)))


def _naive_sums(normed_M, main_normed, w, batch, depth, top_n):
    """Python loop over rows, positions and depths: [M, 5] sums of ce, kl, agree, accept, count."""
    out = np.zeros((depth, 5))
    seg, pos, tok_t = batch["segment_ids"], batch["positions"], batch["targets"]
    b_, t_ = seg.shape
    for k in range(1, depth + 1):
        for b in range(b_):
            for i in range(t_):
                j = i + k
                if j >= t_ or seg[b, i] == 0 or seg[b, j] != seg[b, i] or pos[b, j] != pos[b, i] + k:
                    continue
                if not batch["loss_mask"][b, j]:
                    continue
                s = normed_M[k - 1, b, i] @ w
                logq = s - np.log(np.sum(np.exp(s - s.max()))) - s.max()
                t = main_normed[b, j] @ w
                logp = t - np.log(np.sum(np.exp(t - t.max()))) - t.max()
                if top_n:
                    idx = np.argsort(-t)[:top_n]
                    pt = np.exp(t[idx] - t[idx].max())
                    pt /= pt.sum()
                    kl = np.sum(pt * (np.log(pt) - logq[idx]))
                else:
                    kl = np.sum(np.exp(logp) * (logp - logq))
                out[k - 1] += [-logq[tok_t[b, j]], kl, float(np.argmax(s) == np.argmax(t)),
                               np.sum(np.minimum(np.exp(logp), np.exp(logq))), 1.0]
    return out


@functools.cache
def _forward_with_mtp():
    """(cfg, variables, batch, mtp batch, ModelOutput) of the packed batch, computed once."""
    cfg = _cfg()
    v = random_variables(cfg, head_scale=30.0)
    batch = {k: jnp.asarray(x) for k, x in _packed_batch().items()}
    mb = mtp_batch(batch, cfg.num_mtp_layers)
    out = jax.jit(lambda v, b, mt: Transformer(cfg).apply(v, b["tokens"], b["positions"], b["segment_ids"],
                                                          mtp_tokens=mt))(v, batch, mb["mtp_tokens"])
    return cfg, v, batch, mb, out


@pytest.mark.parametrize("top_n", [0, 5])
def test_mtp_loss_matches_naive_per_position_reference(top_n):
    cfg, v, batch, mb, out = _forward_with_mtp()
    w = v["params"]["lm_head"]
    f64 = lambda x: np.asarray(x, np.float64)  # noqa: E731
    ref = _naive_sums(f64(out.mtp.normed), f64(out.normed), f64(w), {k: np.asarray(x) for k, x in batch.items()},
                      cfg.num_mtp_layers, top_n)
    teacher = teacher_hidden(out.normed, cfg.num_mtp_layers, shift_left)
    for chunk in (7, 28):  # ragged last chunk, one chunk
        s = jax.jit(chunked_mtp_sums, static_argnames=("top_n", "chunk"))(
            out.mtp.normed, teacher, [w, w], w, mb["mtp_targets"], mb["mtp_mask"], top_n=top_n, chunk=chunk)
        got = np.stack([np.asarray(s.ce), np.asarray(s.kl), np.asarray(s.agree), np.asarray(s.accept),
                        np.asarray(s.count)], axis=1)
        np.testing.assert_allclose(got, ref, **FP32_BLOCK)
    assert ref[:, 4].tolist() == [21.0, 18.0] and ref[:, 1].min() > 0.05  # masks exercised; teacher ≠ student


def test_mtp_predictions_never_see_tokens_beyond_i_plus_k():
    """d(depth-k logits at position i) / d(embedding row of the token at position j) is 0 iff j > i + k."""
    cfg = _cfg()
    v = random_variables(cfg)
    t = 10
    tok = jnp.arange(3, 3 + t, dtype=jnp.int32)[None]  # distinct ids: embedding row ↔ position
    mt = mtp_batch(dict(tokens=tok, targets=tok, loss_mask=jnp.ones_like(tok)), cfg.num_mtp_layers)["mtp_tokens"]

    def logits_at(emb, k, i):
        params = dict(v["params"], embedding=emb)
        out = Transformer(cfg).apply(dict(v, params=params), tok, mtp_tokens=mt, compute_logits=False)
        return jnp.sum(out.mtp.normed[k - 1, 0, i] @ params["lm_head"])

    grad = jax.jit(jax.grad(logits_at))
    for k, i in ((1, 0), (1, 4), (2, 3), (2, 7)):
        g = np.asarray(jnp.abs(grad(v["params"]["embedding"], k, i)[3:3 + t]).sum(-1))
        assert np.all(g[i + k + 1:] == 0.0), f"depth {k} position {i} sees the future: {g}"
        assert np.all(g[: i + k + 1] > 0.0), f"depth {k} position {i} ignores tokens ≤ i+k: {g}"


def test_mtp_on_packed_rows_matches_separate_documents():
    cfg = _cfg()
    v = random_variables(cfg)
    b = {k: jnp.asarray(x[:1]) for k, x in _packed_batch().items()}
    apply = jax.jit(lambda v, b: Transformer(cfg).apply(v, b["tokens"], b["positions"], b["segment_ids"],
                                                        mtp_tokens=mtp_batch(b, 2)["mtp_tokens"],
                                                        compute_logits=False).mtp.normed)
    packed = apply(v, b)
    for lo, hi in ((0, 5), (5, 11)):  # each document alone at the start of a row (same shape: one compile)
        keep = (jnp.arange(14) < hi - lo)[None]
        doc = {k: jnp.where(keep, jnp.roll(x, -lo, axis=1), 0) for k, x in b.items()}
        doc["segment_ids"] = keep.astype(jnp.int32)
        np.testing.assert_allclose(np.asarray(packed[:, :, lo:hi]), np.asarray(apply(v, doc)[:, :, :hi - lo]),
                                   **FP32_BLOCK)


def test_detach_trunk_trains_only_the_mtp_modules():
    from composer2_jax.train.step import StepConfig, mtp_loss_sums

    cfg = _cfg()
    v = random_variables(cfg)
    batch = {k: jnp.asarray(x) for k, x in _packed_batch().items()}
    batch.update(mtp_batch(batch, 2))

    def mtp_loss(params, detach):
        sc = StepConfig(mtp=MTPLossConfig(distill_weight=1.0, detach_trunk=detach))
        out = Transformer(cfg).apply(dict(v, params=params), batch["tokens"], batch["positions"],
                                     batch["segment_ids"], mtp_tokens=batch["mtp_tokens"], mtp_detach=detach,
                                     compute_logits=False)
        s = mtp_loss_sums(params, out, batch, cfg, sc)
        return jnp.sum(s.ce + s.kl)

    both = jax.jit(lambda p: (jax.grad(mtp_loss)(p, True), jax.grad(mtp_loss)(p, False)))(v["params"])
    for detach, g in zip((True, False), both):
        trunk = {k: x for k, x in g.items() if k != "mtp"}
        trunk_norm = sum(float(jnp.sum(jnp.abs(x))) for x in jax.tree.leaves(trunk))
        mtp_norm = sum(float(jnp.sum(jnp.abs(x))) for x in jax.tree.leaves(g["mtp"]))
        assert mtp_norm > 0
        assert (trunk_norm == 0.0) == detach, (detach, trunk_norm)


def test_mtp_weight_schedule():
    c = MTPLossConfig(weight=0.3, final_weight=0.1, switch_step=10)
    assert [round(float(mtp_weight(s, c)), 6) for s in (0, 9, 10, 50)] == [0.3, 0.3, 0.1, 0.1]
    r = dataclasses.replace(c, ramp_steps=4)
    np.testing.assert_allclose([float(mtp_weight(s, r)) for s in (10, 12, 14, 20)], [0.3, 0.2, 0.1, 0.1], **FP32_FN)
    assert float(mtp_weight(10**6, MTPLossConfig(weight=0.3))) == pytest.approx(0.3)
    assert not MTPLossConfig(weight=0.0, final_weight=0.0).enabled
    with pytest.raises(ValueError, match="mtp.distill_top_n=-1"):
        MTPLossConfig(distill_top_n=-1)


def test_mtp_param_names_match_the_hf_converter():
    from composer2_jax.convert.mapping import groups

    cfg = _cfg()
    v = random_variables(cfg)
    for g in groups(cfg):
        if g.kind != "mtp":
            continue
        for leaf in g.leaves:
            tree = v[leaf.collection]["mtp"][g.name]
            for key in leaf.path:
                tree = tree[key]
            assert tree.shape == leaf.shape, (g.name, leaf.path)


def test_train_step_with_mtp_reports_metrics_and_learns():
    from composer2_jax.train import optim
    from composer2_jax.train.state import TrainState, logical_axes
    from composer2_jax.train.step import StepConfig, make_train_step

    cfg = _cfg()
    v = random_variables(cfg)
    oc = optim.OptimConfig(lr=1e-2, warmup_steps=1, total_steps=20)
    names = logical_axes(jax.eval_shape(lambda: Transformer(cfg).init(jax.random.key(0), jnp.zeros((1, 4), jnp.int32))))
    tx = optim.make_optimizer(oc, v["params"], names["params"])
    state = TrainState(step=jnp.zeros((), jnp.int32), params=v["params"], opt_state=tx.init(v["params"]),
                       router_state=v["router_state"])
    sc = StepConfig(mtp=MTPLossConfig(weight=1.0, distill_weight=0.5, switch_step=-1))
    step = jax.jit(make_train_step(Transformer(cfg), tx, sc))
    tok = np.tile(np.arange(17) % 5 + 1, (4, 1)).astype(np.int32)  # a periodic stream every head can learn
    batch = dict(tokens=tok[:, :-1], targets=tok[:, 1:], loss_mask=np.ones((4, 16), np.int32),
                 segment_ids=np.ones((4, 16), np.int32), positions=np.tile(np.arange(16), (4, 1)).astype(np.int32))
    first = None
    for _ in range(12):
        state, m = step(state, batch)
        first = first or {k: float(x) for k, x in m.items() if np.ndim(x) == 0}
    assert {"mtp/ce_1", "mtp/kl_2", "mtp/agree_1", "mtp/accept_2", "mtp/loss", "mtp/weight"} <= set(m)
    assert float(m["mtp/ce_2"]) < first["mtp/ce_2"] - 1.0, (first["mtp/ce_2"], float(m["mtp/ce_2"]))
    assert float(m["mtp/accept_1"]) > first["mtp/accept_1"]
    bias = state.router_state["mtp"]["mtp_0"]["block"]["moe"]["e_score_correction_bias"]
    assert float(jnp.abs(bias).sum()) > 0  # the MTP blocks' routing biases are updated too
