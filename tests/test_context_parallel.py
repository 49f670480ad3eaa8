"""The whole decoder context-parallel: Transformer(attention_kernel='ring' | 'ring_latent' | 'allgather_cp') under a
mesh with context > 1, fed zigzagged tokens/positions/segment ids, ≡ the plain model (logits and gradients); and the
cpt_long YaRN helper (32k → 256k) against the DeepSeek reference formula."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn

from composer2_jax.model import Transformer
from composer2_jax.model import context_parallel as cp
from composer2_jax.model.layers import (
    apply_rope,
    rope_attention_factor,
    rope_inv_freq,
    softmax_scale,
)
from composer2_jax.model_config import (
    RopeScaling,
    get_model_config,
    long_context_rope,
    model_config,
    preset,
)
from composer2_jax.sharding import LOGICAL_RULES, make_mesh
from tests.tolerances import FP32_FN, SHARDED_FP32

B, T = 2, 32


def _packed_batch():
    """Tokens, positions and segment ids [B, T]: row 0 packs two documents, row 1 is one document."""
    tok = jax.random.randint(jax.random.key(1), (B, T), 0, 512, dtype=jnp.int32)
    seg = jnp.asarray([[1] * 11 + [2] * 21, [1] * T], jnp.int32)
    pos = jnp.asarray([list(range(11)) + list(range(21)), list(range(T))], jnp.int32)
    return tok, pos, seg


def _loss_and_logits(cfg, variables, params, tok, pos, seg, mesh=None):
    out = Transformer(cfg, mesh).apply(dict(variables, params=params), tok, pos, seg)
    return jnp.mean(jax.nn.log_softmax(out.logits)[..., 0]) + 0.01 * out.balance_loss, out.logits


@pytest.mark.parametrize("kernel,context,other,layers,packed", [
    ("ring", 4, {}, 3, True),  # the toy preset as is, packed documents
    ("ring_latent", 2, dict(fsdp=2, tensor=2), 2, False),  # latent passing, batch and heads sharded, no segment ids
    pytest.param("allgather_cp", 8, {}, 2, True, marks=pytest.mark.slow),
])
def test_context_parallel_model_matches_unsharded(kernel, context, other, layers, packed):
    cfg = get_model_config("toy", num_layers=layers)
    tok, pos, seg = _packed_batch()
    if not packed:
        pos, seg = jnp.broadcast_to(jnp.arange(T, dtype=jnp.int32), (B, T)), None
    variables = nn.unbox(Transformer(cfg).init(jax.random.key(0), tok))
    grad_fn = lambda c, mesh, *a: jax.value_and_grad(  # noqa: E731
        lambda p: _loss_and_logits(c, variables, p, *a, mesh=mesh), has_aux=True)(variables["params"])
    (loss_ref, logits_ref), g_ref = jax.jit(lambda *a: grad_fn(cfg, None, *a))(tok, pos, seg)

    cfg_cp = dataclasses.replace(cfg, attention_kernel=kernel)
    size = context * math.prod(other.values())
    mesh = make_mesh(dict(context=context, **other), devices=jax.devices()[:size])
    zz = [None if a is None else cp.zigzag(a, context) for a in (tok, pos, seg)]  # the data path's job
    with jax.set_mesh(mesh), nn.logical_axis_rules(LOGICAL_RULES):
        (loss, logits), g = jax.jit(lambda *a: grad_fn(cfg_cp, mesh, *a))(*zz)
    np.testing.assert_allclose(float(loss), float(loss_ref), **SHARDED_FP32)
    np.testing.assert_allclose(np.asarray(cp.unzigzag(logits, context)), np.asarray(logits_ref), **SHARDED_FP32)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(g_ref)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), **SHARDED_FP32)


# ----------------------------------------------------------------------------------------------- YaRN for cpt_long


def _deepseek_yarn(dim, base, factor, original, beta_fast, beta_slow, mscale, mscale_all_dim):
    """DeepSeek-V3 `DeepseekV3YarnRotaryEmbedding` + softmax-scale correction, transcribed in float64 NumPy."""

    def correction_dim(rot):
        return dim * math.log(original / (rot * 2 * math.pi)) / (2 * math.log(base))

    def get_mscale(scale, m):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    freq_extra = 1.0 / base ** (np.arange(0, dim, 2) / dim)
    freq_inter = 1.0 / (factor * base ** (np.arange(0, dim, 2) / dim))
    inv_freq_mask = 1.0 - np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
    inv_freq = freq_inter * (1 - inv_freq_mask) + freq_extra * inv_freq_mask
    cos_sin_mscale = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
    softmax_mscale = get_mscale(factor, mscale_all_dim) ** 2
    return inv_freq, cos_sin_mscale, softmax_mscale


def test_long_context_rope_sets_yarn_for_32k_to_256k():
    m = long_context_rope(preset("gpu_small"))
    cfg = model_config(m)
    s = cfg.rope_scaling
    assert (s.factor, s.original_max_position_embeddings, cfg.max_position_embeddings) == (8.0, 32768, 262144)
    assert (s.beta_fast, s.beta_slow, s.mscale, s.mscale_all_dim) == (32.0, 1.0, 1.0, 1.0)  # kept from the preset
    inv, cos_sin, sm = _deepseek_yarn(cfg.qk_rope_head_dim, cfg.rope_theta, 8.0, 32768, 32.0, 1.0, 1.0, 1.0)
    np.testing.assert_allclose(rope_inv_freq(cfg.qk_rope_head_dim, cfg.rope_theta, s), inv, **FP32_FN)
    assert math.isclose(rope_attention_factor(s), cos_sin, rel_tol=1e-12)
    assert math.isclose(softmax_scale(cfg), cfg.qk_head_dim ** -0.5 * sm, rel_tol=1e-12)
    assert math.isclose(sm, (0.1 * math.log(8.0) + 1.0) ** 2)
    with pytest.raises(ValueError, match=r"original_len=65536 <= target_len=32768"):
        long_context_rope(preset("toy"), 32768, 65536)


@pytest.mark.parametrize("s", [RopeScaling(8.0, 32768, 32.0, 1.0, 1.0, 1.0),
                               RopeScaling(8.0, 32768, 32.0, 1.0, 0.707, 1.0)])
def test_yarn_32k_to_256k_matches_deepseek_and_hf(s):
    inv, cos_sin, _ = _deepseek_yarn(64, 50000.0, s.factor, s.original_max_position_embeddings, s.beta_fast,
                                     s.beta_slow, s.mscale, s.mscale_all_dim)
    np.testing.assert_allclose(rope_inv_freq(64, 50000.0, s), inv, **FP32_FN)
    assert math.isclose(rope_attention_factor(s), cos_sin, rel_tol=1e-12)
    from tests.test_layers import _hf_yarn_inv_freq  # transformers' DeepseekV3 YaRN

    inv_hf, factor_hf = _hf_yarn_inv_freq(64, 50000.0, s)
    np.testing.assert_allclose(rope_inv_freq(64, 50000.0, s), inv_hf, **FP32_FN)
    assert math.isclose(rope_attention_factor(s), factor_hf, rel_tol=1e-12)


def test_long_context_rope_with_factor_one_is_plain_rope():
    m = dataclasses.replace(preset("toy"), rope_scaling=None)
    cfg_y = model_config(long_context_rope(m, 4096, 4096))
    cfg_p = model_config(m)
    assert cfg_y.rope_scaling.factor == 1.0
    x = jax.random.normal(jax.random.key(0), (1, 9, 2, cfg_p.qk_rope_head_dim))
    pos = jnp.arange(0, 9 * 1000, 1000)[None]
    np.testing.assert_array_equal(np.asarray(apply_rope(x, pos, cfg_y)), np.asarray(apply_rope(x, pos, cfg_p)))
    assert softmax_scale(cfg_y) == softmax_scale(cfg_p) == cfg_p.qk_head_dim ** -0.5
