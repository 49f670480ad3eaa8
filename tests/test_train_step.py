"""The training step's pieces: chunked CE ≡ full CE, optimizers and schedules, QK-clip, router-bias update,
gradient accumulation ≡ one big batch, sharded step ≡ single-device step, non-finite guard."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn

from composer2_jax import sharding as shd
from composer2_jax.losses.lm import chunked_cross_entropy
from composer2_jax.model import Transformer
from composer2_jax.model.moe import update_router_bias
from composer2_jax.model_config import get_model_config
from composer2_jax.train import optim
from composer2_jax.train.state import init_train_state
from composer2_jax.train.step import StepConfig, make_train_step
from tests.tolerances import FP32_BLOCK, FP32_FN, SHARDED_FP32

rng = np.random.default_rng(0)


def test_chunked_ce_matches_full_logits_values_and_grads():
    h = jnp.asarray(rng.normal(size=(2, 7, 16)), jnp.float32)
    w = jnp.asarray(rng.normal(size=(16, 50)), jnp.float32)
    y = jnp.asarray(rng.integers(0, 50, (2, 7)))
    m = jnp.asarray(rng.random((2, 7)) > 0.3, jnp.float32)

    def full(h, w):
        logp = jax.nn.log_softmax(h @ w)
        return -jnp.sum(jnp.take_along_axis(logp, y[..., None], -1)[..., 0] * m)

    for chunk in (1, 4, 5, 64):  # 14 tokens: exact multiple, ragged last chunk, one chunk
        f = lambda h, w: chunked_cross_entropy(h, w, y, m, chunk).loss_sum  # noqa: E731
        np.testing.assert_allclose(f(h, w), full(h, w), **FP32_FN)
        for a, b in zip(jax.grad(f, (0, 1))(h, w), jax.grad(full, (0, 1))(h, w)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), **FP32_FN)
    r = chunked_cross_entropy(h, w, y, m, 4)
    assert float(r.count) == float(m.sum())
    assert float(r.correct) == float(jnp.sum((jnp.argmax(h @ w, -1) == y) * m))


def test_schedules_have_the_documented_shape():
    c = optim.OptimConfig(lr=1.0, warmup_steps=10, total_steps=100, decay_fraction=0.2, min_lr_ratio=0.1)
    wsd = optim.schedule(c)
    assert float(wsd(0)) == 0.0 and float(wsd(10)) == pytest.approx(1.0)
    assert float(wsd(50)) == pytest.approx(1.0) and float(wsd(79)) == pytest.approx(1.0)
    assert float(wsd(90)) == pytest.approx(0.55) and float(wsd(100)) == pytest.approx(0.1)
    cos = optim.schedule(dataclasses.replace(c, schedule="cosine"))
    assert float(cos(10)) == pytest.approx(1.0) and float(cos(55)) == pytest.approx(0.55, abs=1e-3)
    assert float(cos(100)) == pytest.approx(0.1)
    with pytest.raises(ValueError, match=r"optim.schedule='linear'; expected one of \('wsd', 'cosine', 'constant'\)"):
        dataclasses.replace(c, schedule="linear")


def _abstract(cfg):
    from composer2_jax.train.state import logical_axes

    boxed = jax.eval_shape(lambda: Transformer(cfg).init(jax.random.key(0), jnp.zeros((1, 4), jnp.int32)))
    return nn.unbox(boxed)["params"], logical_axes(boxed)["params"]


def test_muon_dimension_numbers_and_decay_mask():
    cfg = get_model_config("toy")
    params, names = _abstract(cfg)
    dims = optim.muon_dims(params, names)
    assert dims["embedding"] is None and dims["lm_head"] is None and dims["final_norm"]["scale"] is None
    moe = dims["stack"]["layer_0"]["moe"]
    assert moe["router"] is None  # router stays on AdamW
    assert moe["wi_gate"] == optim.MuonDimensionNumbers((2,), (3,))  # [layers, E, D, F]: batch layers+experts
    attn = dims["layers_0"]["attn"]
    assert attn["o_proj"] == optim.MuonDimensionNumbers((0, 1), (2,))  # [H, V, D]: input is (heads, head dim)
    assert attn["q_b_proj"] == optim.MuonDimensionNumbers((0,), (1, 2))
    mask = optim.decay_mask(params, names, optim.OptimConfig())
    assert mask["layers_0"]["attn_norm"]["scale"] is False and mask["layers_0"]["mlp"]["wo"] is True
    assert optim.decay_mask(params, names, optim.OptimConfig(decay_embeddings=False))["embedding"] is False


@pytest.mark.parametrize("name", ["adamw", "muon"])
def test_optimizers_reduce_the_loss(name):
    cfg = get_model_config("toy")
    mesh = shd.make_mesh({"fsdp": 1}, devices=jax.devices()[:1])
    oc = optim.OptimConfig(name=name, lr=3e-3, warmup_steps=1, total_steps=20)
    state, _, tx = init_train_state(Transformer(cfg), lambda p, n: optim.make_optimizer(oc, p, n), mesh,
                                    jax.random.key(0), (4, 32))
    step = jax.jit(make_train_step(Transformer(cfg), tx, StepConfig()))
    batch = _batch(4, 32)
    losses = []
    for _ in range(8):
        state, m = step(state, batch)
        losses.append(float(m["loss"]))
    assert losses[-1] < losses[0] - 0.5, losses


def _batch(b, t, seed=0, vocab=512):
    r = np.random.default_rng(seed)
    tok = r.integers(0, vocab, (b, t + 1)).astype(np.int32)
    return dict(tokens=tok[:, :-1], targets=tok[:, 1:], loss_mask=np.ones((b, t), np.int32),
                segment_ids=np.ones((b, t), np.int32), positions=np.broadcast_to(np.arange(t), (b, t)).astype(np.int32))


def _max_logits(cfg, p, x, pos):
    """Per-head max pre-softmax logit of one MLA layer, recomputed directly from its params (no module code)."""
    from composer2_jax.model.layers import apply_rope, softmax_scale

    def norm(v, w):
        return v / jnp.sqrt(jnp.mean(v * v, -1, keepdims=True) + 1e-6) * w

    n = cfg.qk_nope_head_dim
    q = jnp.einsum("BTQ,QHK->BTHK", norm(x @ p["q_a_proj"], p["q_a_norm"]["scale"]), p["q_b_proj"])
    q = jnp.concatenate([q[..., :n], apply_rope(q[..., n:], pos, cfg)], -1)
    kv = x @ p["kv_a_proj"]
    ckv = norm(kv[..., : cfg.kv_lora_rank], p["kv_a_norm"]["scale"])
    kr = apply_rope(kv[..., cfg.kv_lora_rank:], pos, cfg)
    kn = jnp.einsum("BSL,LHX->BSHX", ckv, p["kv_b_proj"])[..., :n]
    logits = jnp.einsum("BTHN,BSHN->BHTS", q[..., :n], kn) + jnp.einsum("BTHR,BSR->BHTS", q[..., n:], kr)
    return jnp.max(logits * softmax_scale(cfg), axis=(0, 2, 3))


def test_qk_clip_scales_each_offending_head_to_tau():
    cfg = get_model_config("toy")
    from composer2_jax.model.attention import MLAttention

    x = jnp.asarray(rng.normal(size=(1, 6, cfg.hidden_size)) * 30, jnp.float32)
    pos = jnp.arange(6)[None]
    p = nn.unbox(MLAttention(cfg).init(jax.random.key(1), x, pos))["params"]
    p = jax.tree.map(lambda a: a * 8.0 if a.ndim > 1 else a, p)  # blow up logits
    s = _max_logits(cfg, p, x, pos)
    tau = float(jnp.sort(s)[1])  # some heads above τ, some below
    clipped = optim.qk_clip(p, s, tau)
    s2 = _max_logits(cfg, clipped, x, pos)
    expect = jnp.minimum(s, tau)
    np.testing.assert_allclose(np.asarray(s2), np.asarray(expect), rtol=1e-4)
    np.testing.assert_array_equal(np.asarray(clipped["kv_a_proj"]), np.asarray(p["kv_a_proj"]))  # shared k_R untouched


def test_router_bias_update_moves_toward_uniform_in_model_order():
    cfg = get_model_config("toy", num_layers=5, first_k_dense_replace=1, moe_layer_freq=2,
                           num_mtp_layers=0)  # the trunk's routers only
    v = nn.unbox(Transformer(cfg).init(jax.random.key(0), jnp.zeros((1, 4), jnp.int32)))
    rs = v["router_state"]
    from composer2_jax.model.layer_plan import moe_layer_ids

    ids = moe_layer_ids(cfg)  # layers 2 and 4: both in the scanned stack (units [1,2], [3,4]; MoE at 2 and 4)
    load = jnp.asarray(np.stack([np.arange(8.0) * (i + 1) for i in range(len(ids))]), jnp.float32)
    new = update_router_bias(rs, load, 0.5, cfg)
    got = np.asarray(jax.tree.leaves(new)[0])  # [units, E]
    expect = 0.5 * np.sign(load.mean(-1, keepdims=True) - load)
    np.testing.assert_array_equal(got, expect)


def test_gradient_accumulation_matches_one_batch():
    cfg = get_model_config("toy")
    mesh = shd.make_mesh({"fsdp": 1}, devices=jax.devices()[:1])
    oc = optim.OptimConfig(lr=1e-3, warmup_steps=1)
    out = []
    for accum in (1, 4):
        state, _, tx = init_train_state(Transformer(cfg), lambda p, n: optim.make_optimizer(oc, p, n), mesh,
                                        jax.random.key(0), (8, 16))
        sc = StepConfig(grad_accum=accum, balance_loss_weight=0.0, router_bias_rate=0.0)
        state, m = jax.jit(make_train_step(Transformer(cfg), tx, sc))(state, _batch(8, 16))
        out.append((m, state))
    np.testing.assert_allclose(out[0][0]["loss"], out[1][0]["loss"], **FP32_FN)
    np.testing.assert_allclose(out[0][0]["grad_norm"], out[1][0]["grad_norm"], **FP32_FN)
    for a, b in zip(jax.tree.leaves(out[0][1].params), jax.tree.leaves(out[1][1].params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), **FP32_BLOCK)


@pytest.mark.parametrize("mesh_shape", [dict(fsdp=8),  # the other meshes (~60 s each) run in CI's slow step
                                        pytest.param(dict(data=2, fsdp=2, tensor=2), marks=pytest.mark.slow),
                                        pytest.param(dict(fsdp=2, expert=2, tensor=2), marks=pytest.mark.slow)])
def test_sharded_step_matches_single_device(mesh_shape):
    cfg = get_model_config("toy")
    oc = optim.OptimConfig(lr=1e-3, warmup_steps=1)
    make_tx = lambda p, n: optim.make_optimizer(oc, p, n)  # noqa: E731
    results = []
    for mesh in (shd.make_mesh({"fsdp": 1}, devices=jax.devices()[:1]), shd.make_mesh(mesh_shape)):
        from composer2_jax.train.state import activate

        state, shardings, tx = init_train_state(Transformer(cfg), make_tx, mesh, jax.random.key(0), (8, 16))
        with activate(mesh):
            step = jax.jit(make_train_step(Transformer(cfg, mesh), tx, StepConfig()), donate_argnums=0)
            losses = []
            for i in range(3):
                state, m = step(state, _batch(8, 16, seed=i))
                losses.append(float(m["loss"]))
        results.append((losses, jax.device_get(state.params)))
    np.testing.assert_allclose(results[0][0], results[1][0], **SHARDED_FP32)
    for a, b in zip(jax.tree.leaves(results[0][1]), jax.tree.leaves(results[1][1])):
        np.testing.assert_allclose(a, b, **FP32_BLOCK)
    leaf = jax.tree.leaves(state.params)[0]
    assert len(leaf.sharding.device_set) == 8


@pytest.mark.slow
def test_nonfinite_step_is_skipped_when_configured():
    cfg = get_model_config("toy")
    mesh = shd.make_mesh({"fsdp": 1}, devices=jax.devices()[:1])
    oc = optim.OptimConfig(lr=1e-3, warmup_steps=1)
    state, _, tx = init_train_state(Transformer(cfg), lambda p, n: optim.make_optimizer(oc, p, n), mesh,
                                    jax.random.key(0), (2, 8))
    bad = _batch(2, 8)
    before = jax.device_get(state.params)
    poisoned = state.replace(params=jax.tree.map(lambda a: a.at[(0,) * a.ndim].set(jnp.nan)
                                                 if a.shape == state.params["lm_head"].shape else a, state.params))
    for skip in (True, False):
        new, m = jax.jit(make_train_step(Transformer(cfg), tx, StepConfig(skip_nonfinite=skip)))(poisoned, bad)
        assert not bool(m["finite"]) and int(new.step) == 1
        lm = np.asarray(new.params["lm_head"])
        assert np.isnan(lm[0, 0]) and (np.array_equal(lm[1:], before["lm_head"][1:]) == skip)


def test_qk_clip_in_the_train_step_caps_every_layers_max_logit():
    """With lr = 0, one step with τ below the current max logits leaves every head's max logit at min(S, τ)."""
    cfg = get_model_config("toy", num_layers=3)
    mesh = shd.make_mesh({"fsdp": 1}, devices=jax.devices()[:1])
    oc = optim.OptimConfig(lr=0.0, warmup_steps=1, weight_decay=0.0)
    state, _, tx = init_train_state(Transformer(cfg), lambda p, n: optim.make_optimizer(oc, p, n), mesh,
                                    jax.random.key(0), (2, 16))
    state = state.replace(params=jax.tree.map(lambda a: a * 6.0 if a.ndim >= 2 else a, state.params))
    batch = _batch(2, 16)

    def max_logits(params):
        _, inter = Transformer(cfg).apply({"params": params, "router_state": state.router_state}, batch["tokens"],
                                          batch["positions"], batch["segment_ids"], mutable=["intermediates"])
        return jax.tree.leaves(inter["intermediates"])

    before = max_logits(state.params)
    tau = float(np.median(np.concatenate([np.asarray(x).ravel() for x in before])))
    new, m = jax.jit(make_train_step(Transformer(cfg), tx, StepConfig(router_bias_rate=0.0), qk_clip_tau=tau))(
        state, batch)
    after = max_logits(new.params)
    assert float(m["max_attention_logit"]) == pytest.approx(max(float(np.max(x)) for x in before), rel=1e-6)
    # The first layer sees the same input, so its heads' max logits become exactly min(S, τ); later layers' inputs
    # change with the clipped layers before them, so for those the weights are checked against γ = min(1, τ/S).
    np.testing.assert_allclose(np.asarray(after[0]), np.minimum(np.asarray(before[0]), tau), rtol=1e-4)
    gamma = np.minimum(1.0, tau / np.asarray(before[1]))  # [units, H] of the scanned stack
    old_q = np.asarray(state.params["stack"]["layer_0"]["attn"]["q_b_proj"])  # [U, Q, H, N+R]
    new_q = np.asarray(new.params["stack"]["layer_0"]["attn"]["q_b_proj"])
    n = cfg.qk_nope_head_dim
    np.testing.assert_allclose(new_q[..., :n], old_q[..., :n] * np.sqrt(gamma)[:, None, :, None], rtol=1e-5)
    np.testing.assert_allclose(new_q[..., n:], old_q[..., n:] * gamma[:, None, :, None], rtol=1e-5)
    old_kv = np.asarray(state.params["stack"]["layer_0"]["attn"]["kv_b_proj"])
    new_kv = np.asarray(new.params["stack"]["layer_0"]["attn"]["kv_b_proj"])
    np.testing.assert_allclose(new_kv[..., :n], old_kv[..., :n] * np.sqrt(gamma)[:, None, :, None], rtol=1e-5)
    np.testing.assert_array_equal(new_kv[..., n:], old_kv[..., n:])  # values untouched
    assert (gamma < 1).any() and (gamma == 1).any()
