"""Test and benchmark helpers: model variables without compiling the init (numpy draws on the abstract tree)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from composer2_jax.model_config import ModelConfig


def random_variables(cfg: ModelConfig, seed: int = 0, head_scale: float = 1.0, on_device: bool = False) -> dict:
    """{"params", "router_state"} shaped like `Transformer(cfg).init` ({} router state when dense): norms 1, router
    biases 0, matrices N(0, initializer_range²); the LM head is multiplied by `head_scale` (sharper distributions).
    `on_device` draws with jax.random on the default device (large presets: no host-side float64 copies)."""
    from composer2_jax.model import Transformer

    abstract = nn.unbox(jax.eval_shape(lambda k: Transformer(cfg).init(k, jnp.zeros((1, 4), jnp.int32)),
                                       jax.random.key(0)))
    rng = np.random.default_rng(seed)

    def draw(path, leaf):
        name = str(getattr(path[-1], "key", path[-1]))
        if name == "scale":
            return jnp.ones(leaf.shape, leaf.dtype)
        if name == "e_score_correction_bias":
            return jnp.zeros(leaf.shape, leaf.dtype)
        std = cfg.initializer_range * (head_scale if name == "lm_head" else 1.0)
        if on_device:
            key = jax.random.key(int(rng.integers(2**31)))
            return (jax.random.normal(key, leaf.shape, jnp.float32) * std).astype(leaf.dtype)
        return jnp.asarray(rng.normal(0.0, std, leaf.shape), leaf.dtype)

    out = jax.tree_util.tree_map_with_path(draw, abstract)
    return dict(out, router_state=out.get("router_state", {}))
