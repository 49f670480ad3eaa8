"""Subprocess driver of tests/test_rl_faults.py: trains a micro model version by version on fixed batches, with a
synchronous orbax checkpoint after every version, optionally SIGKILLing itself in the middle of one version's update.

    python tests/rl_trainer_crash_driver.py WORKDIR VERSIONS [CRASH_VERSION CRASH_CHUNK]

Resumes from WORKDIR/checkpoints when a checkpoint is there. Prints one JSON line per trained version (its loss
terms) and, at the end, writes WORKDIR/params.npz (the final params, flattened by path).
"""

import json
import os
import signal
import sys

import jax
import numpy as np

from composer2_jax.episode import SegmentBuilder
from composer2_jax.model.layer_plan import moe_layer_ids
from composer2_jax.rl.records import EpisodeRecord, GroupRecord
from composer2_jax.rl.services.testing import micro_model_config
from composer2_jax.rl.services.trainer import Trainer, TrainerConfig
from composer2_jax.train.checkpoint import Checkpointer
from composer2_jax.train.optim import OptimConfig

CFG = micro_model_config()
OC = OptimConfig(lr=1e-2, schedule="constant", warmup_steps=0, weight_decay=0.0, clip_norm=1.0)
TC = TrainerConfig(rows=2, seq_len=64, delta_stats=False)  # several optimizer updates (chunks) per version
KEYS = ("loss", "pg_loss", "entropy", "grad_norm", "tokens")


def _episode(rng, reward: float) -> EpisodeRecord:
    """A two-turn episode with made-up behaviour log-probs and random (valid) recorded experts per position."""
    b = SegmentBuilder(rng.integers(0, 200, 4).tolist(), rng.integers(0, 200, 6).tolist(), [1], 200)
    for turn in range(2):
        n = int(rng.integers(5, 12))
        b.append(rng.integers(0, 200, n).tolist(), True, (-rng.random(n) - 0.1).tolist(), policy_version=0)
        if turn == 0:
            b.append(rng.integers(0, 200, 5).tolist(), False)
    ep = b.finish(reward=reward)
    k, e, moe = CFG.num_experts_per_tok, CFG.n_routed_experts, len(moe_layer_ids(CFG))
    routing = [np.argsort(rng.random((moe, len(s), e)), axis=-1)[..., :k].astype(np.int32) for s in ep.segments]
    return EpisodeRecord(ep, routing, "t", "easy", reward, reward, 0.0, {}, "submitted", 2, 0, 0, 20, 0.0, 0.0, 0)


def batch(version: int) -> list[GroupRecord]:
    """The fixed batch that trains `version` (the same in every process)."""
    rng = np.random.default_rng(1000 + version)
    return [GroupRecord(g, f"t{g}", version - 1, [_episode(rng, float(r)) for r in (1, 0, 1, 0)]) for g in range(2)]


def main(argv: list[str]) -> int:
    workdir, versions = argv[1], int(argv[2])
    crash = (int(argv[3]), int(argv[4])) if len(argv) > 4 else None
    trainer = Trainer(CFG, OC, TC, seed=0)
    ckpt = Checkpointer(os.path.join(workdir, "checkpoints"), max_to_keep=2, async_save=False)
    if ckpt.latest_step() is not None:
        step, state, data, _ = ckpt.restore(trainer.abstract)
        trainer.restore(state, int(data["version"]))
        print(json.dumps({"resumed": trainer.version}), flush=True)
    else:
        trainer.state  # the fresh init, outside train()'s mesh context (it fails inside it)
    update, calls = trainer._update, [0]

    def update_then_maybe_die(*args):
        out = update(*args)
        calls[0] += 1
        if crash is not None and trainer.version + 1 == crash[0] and calls[0] == crash[1]:
            jax.block_until_ready(out)
            print(json.dumps({"killed_in": crash[0], "after_chunk": calls[0]}), flush=True)
            os.kill(os.getpid(), signal.SIGKILL)  # the trainer dies with the version half applied in memory
        return out

    trainer._update = update_then_maybe_die
    while trainer.version < versions:
        calls[0] = 0
        metrics = trainer.train(batch(trainer.version + 1))
        ckpt.save(trainer.version, trainer.state, {"version": trainer.version})
        ckpt.wait()
        print(json.dumps({"version": trainer.version, "updates": metrics["updates"],
                          **{k: metrics[k] for k in KEYS}}), flush=True)
    ckpt.close()
    flat = jax.tree_util.tree_flatten_with_path(jax.device_get(trainer.state.params))[0]
    np.savez(os.path.join(workdir, "params.npz"), **{jax.tree_util.keystr(p): np.asarray(x) for p, x in flat})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
