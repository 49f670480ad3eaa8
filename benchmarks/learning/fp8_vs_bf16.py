"""FP8 training against the bf16 option, side by side (JSON lines): the same toy MoE model, data and seeds trained
with model.matmul_precision = 'bf16' and 'fp8' (model/fp8.py), the loss curves window by window.

    python -m benchmarks.learning.fp8_vs_bf16                  # 300 steps, ~toy model with 128-multiple FFN widths, CPU
    python -m benchmarks.learning.fp8_vs_bf16 --steps 60 --window 10

Data: fresh sequences of a fixed random bigram chain (each token has 8 equally likely successors: the loss falls
from ln V towards the floor ln 8 ≈ 2.08), the same batches for both models, which step in turn. Both runs compute
in bf16 (model.dtype) with fp32 master weights; the fp8 run makes every FFN
matmul (dense SwiGLU, shared and routed experts) block-scaled FP8. One line per window: both mean losses and the
relative gap; a last line with the largest gap. tests/test_fp8.py runs the same loop for fewer steps.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import jax
import numpy as np

from benchmarks.perf.common import emit
from composer2_jax import sharding as shd
from composer2_jax.model import Transformer
from composer2_jax.model_config import get_model_config
from composer2_jax.train import optim
from composer2_jax.train.state import init_train_state
from composer2_jax.train.step import StepConfig, make_train_step

# The toy preset with FFN widths that fill whole 128-channel tiles (and one partial one: 160 = 128 + 32), in bf16.
MODEL = dict(hidden_size=256, intermediate_size=384, moe_intermediate_size=160, dtype="bfloat16")


@dataclasses.dataclass(frozen=True)
class Run:
    """One side-by-side comparison."""

    steps: int = 300  # optimizer steps per run
    batch: int = 8  # sequences per step
    seq_len: int = 64  # tokens per sequence
    successors: int = 8  # each token is followed by one of this many, uniformly: the loss floor is ln(successors)
    lr: float = 3e-3  # AdamW peak learning rate (warmup 10 steps, constant after)
    seed: int = 0  # data and initialisation seed


def _batches(run: Run, vocab: int):
    """The run's batches: fresh sequences of a fixed random bigram chain (every token has `successors` equally
    likely next tokens), so the loss falls from ln V towards the floor ln(successors) and cannot be memorised."""
    r = np.random.default_rng(run.seed)
    table = r.integers(0, vocab, (vocab, run.successors))
    ones = np.ones((run.batch, run.seq_len), np.int32)
    pos = np.broadcast_to(np.arange(run.seq_len, dtype=np.int32), (run.batch, run.seq_len))
    for _ in range(run.steps):
        tok = np.empty((run.batch, run.seq_len + 1), np.int32)
        tok[:, 0] = r.integers(0, vocab, run.batch)
        for t in range(run.seq_len):
            tok[:, t + 1] = table[tok[:, t], r.integers(0, run.successors, run.batch)]
        yield dict(tokens=tok[:, :-1], targets=tok[:, 1:], loss_mask=ones, segment_ids=ones, positions=pos)


def _stepper(run: Run, precision: str):
    """(jitted train step, initial state) of the toy model with model.matmul_precision = `precision`."""
    cfg = get_model_config("toy", **MODEL, matmul_precision=precision)
    mesh = shd.make_mesh({"fsdp": 1}, devices=jax.devices()[:1])
    oc = optim.OptimConfig(name="adamw", lr=run.lr, warmup_steps=10, total_steps=run.steps, schedule="constant")
    model = Transformer(cfg)
    state, _, tx = init_train_state(model, lambda p, n: optim.make_optimizer(oc, p, n), mesh,
                                    jax.random.key(run.seed), (run.batch, run.seq_len))
    return jax.jit(make_train_step(model, tx, StepConfig()), donate_argnums=0), state


def side_by_side(run: Run):
    """Yield (step, bf16 loss, fp8 loss): both models take each batch in turn, same seeds."""
    (s16, st16), (s8, st8) = _stepper(run, "bf16"), _stepper(run, "fp8")
    for i, batch in enumerate(_batches(run, get_model_config("toy").vocab_size)):
        st16, m16 = s16(st16, batch)
        st8, m8 = s8(st8, batch)
        yield i, float(m16["loss"]), float(m8["loss"])


def window_gaps(l16: list[float], l8: list[float], window: int) -> list[tuple[int, float, float, float]]:
    """(first step, bf16 mean, fp8 mean, |fp8 − bf16| / bf16) of each window of `window` steps."""
    out = []
    for i in range(0, len(l16), window):
        a, b = float(np.mean(l16[i:i + window])), float(np.mean(l8[i:i + window]))
        out.append((i, a, b, abs(b - a) / a))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--window", type=int, default=25)
    a = ap.parse_args(argv)
    run = Run(steps=a.steps)
    t0 = time.perf_counter()
    l16, l8, gaps = [], [], []
    for i, x16, x8 in side_by_side(run):
        l16.append(x16)
        l8.append(x8)
        if (i + 1) % a.window == 0:  # one line per finished window
            first, m16, m8, gap = window_gaps(l16[-a.window:], l8[-a.window:], a.window)[0]
            gaps.append(gap)
            emit(bench="fp8_vs_bf16", steps=f"{i + 1 - a.window}-{i}", loss_bf16=round(m16, 4), loss_fp8=round(m8, 4),
                 rel_gap=round(gap, 5))
    emit(bench="fp8_vs_bf16", summary=True, steps=run.steps, window=a.window, model=MODEL,
         loss_floor=float(np.log(run.successors)), first_loss_bf16=l16[0], first_loss_fp8=l8[0],
         last_loss_bf16=l16[-1], last_loss_fp8=l8[-1], max_window_rel_gap=max(gaps),
         wall_s=round(time.perf_counter() - t0, 1), backend=jax.default_backend())


if __name__ == "__main__":
    main()
