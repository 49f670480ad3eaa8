"""The whole pipeline on one machine: `python -m experiments.pipeline` (default: toy preset, CPU).

Stages land one by one (CPT bulk → long → SFT → RL → evaluation). Until the trainer exists, this runs the toy
model's forward pass over the embedded corpus (this machine's Python standard library, read as bytes) and prints
a summary: parameter counts, the loss at initialisation (≈ ln(vocab) for a fresh model) and the MoE load.

Hardware: any CPU. Expected: finishes in seconds; loss within a few percent of ln(512) = 6.24.
"""

from __future__ import annotations

import argparse
import json
import math
import sysconfig
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from composer2_jax.config import PRESETS, get_model_config
from composer2_jax.model import Transformer
from composer2_jax.params import count_params


def stdlib_bytes(n_tokens: int) -> np.ndarray:
    """The first n_tokens bytes of the standard library's sorted .py files (the embedded corpus)."""
    out, total = [], 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        data = path.read_bytes()
        out.append(np.frombuffer(data, np.uint8))
        total += len(data)
        if total >= n_tokens:
            break
    return np.concatenate(out)[:n_tokens].astype(np.int32)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="toy", choices=PRESETS)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq_len", type=int, default=256)
    args = ap.parse_args(argv)
    cfg = get_model_config(args.preset)
    t0 = time.time()
    tokens = jnp.asarray(stdlib_bytes(args.batch * (args.seq_len + 1)).reshape(args.batch, args.seq_len + 1))
    tokens = tokens % cfg.vocab_size
    model = Transformer(cfg)
    variables = nn.unbox(jax.jit(model.init)(jax.random.key(0), tokens[:, :-1]))
    out = jax.jit(model.apply)(variables, tokens[:, :-1])
    logp = jax.nn.log_softmax(out.logits)
    loss = -jnp.mean(jnp.take_along_axis(logp, tokens[:, 1:, None], -1))
    total, active = count_params(variables["params"], cfg)
    print(json.dumps(dict(stage="forward", preset=args.preset, params_total=total, params_active=active,
                          loss=round(float(loss), 4), ln_vocab=round(math.log(cfg.vocab_size), 4),
                          moe_max_over_mean_load=round(float(jnp.max(out.moe_load) / jnp.mean(out.moe_load)), 3),
                          seconds=round(time.time() - t0, 2))))


if __name__ == "__main__":
    main()
