"""The whole decoder with expert parallelism: toy forward + gradients on a mesh with expert=4 equal the unsharded run.

Mesh: data=2, expert=4 (fsdp, tensor, context = 1); parameters are placed with the rules table's shardings.
"""

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from composer2_jax import sharding as shd
from composer2_jax.model import Transformer
from composer2_jax.model_config import get_model_config
from tests.tolerances import SHARDED_FP32


def _loss(cfg, variables, params, tok, mesh=None):
    out = Transformer(cfg, mesh).apply(dict(variables, params=params), tok)
    logp = jax.nn.log_softmax(out.logits)
    return -jnp.mean(jnp.take_along_axis(logp[:, :-1], tok[:, 1:, None], -1)) + 0.01 * out.balance_loss, out


def test_transformer_with_expert_parallelism_matches_unsharded():
    cfg = get_model_config("toy", num_layers=2)  # a dense layer, then one MoE layer under nn.scan
    tok = jax.random.randint(jax.random.key(1), (8, 12), 0, cfg.vocab_size, dtype=jnp.int32)
    boxed = jax.jit(lambda k: Transformer(cfg).init(k, tok))(jax.random.key(0))
    v = nn.unbox(boxed)
    step = jax.value_and_grad(lambda p, v, t: _loss(cfg, v, p, t), has_aux=True)
    (l0, out0), g0 = jax.jit(step)(v["params"], v, tok)

    mesh = shd.make_mesh(dict(data=2, expert=4))
    v_sh = jax.device_put(v, shd.logical_shardings(jax.eval_shape(lambda: boxed), mesh))
    step_ep = jax.value_and_grad(lambda p, v, t: _loss(cfg, v, p, t, mesh), has_aux=True)
    with jax.set_mesh(mesh), nn.logical_axis_rules(shd.LOGICAL_RULES):
        (l1, out1), g1 = jax.jit(step_ep)(v_sh["params"], v_sh, tok)
        hlo = jax.jit(step_ep).lower(v_sh["params"], v_sh, tok).as_text()
    assert "all_to_all" in hlo or "all-to-all" in hlo  # the model really dispatched expert-parallel
    assert v_sh["params"]["stack"]["layer_0"]["moe"]["wi_gate"].sharding.spec[1] == "expert"  # [layers, E, D, F]
    np.testing.assert_allclose(float(l1), float(l0), **SHARDED_FP32)
    np.testing.assert_allclose(np.asarray(out1.logits), np.asarray(out0.logits), **SHARDED_FP32)
    np.testing.assert_array_equal(np.asarray(out1.routing), np.asarray(out0.routing))
    np.testing.assert_array_equal(np.asarray(out1.moe_load), np.asarray(out0.moe_load))
    for (path, a), b in zip(jax.tree_util.tree_flatten_with_path(g1)[0], jax.tree.leaves(g0)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), err_msg=jax.tree_util.keystr(path), **SHARDED_FP32)
