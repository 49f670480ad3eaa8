"""The RL trainer on a mesh: one update on 8 fake CPU devices (fsdp, data×expert, data×fsdp×expert, and a context
mesh that lays the packed rows out in zigzag) equals the single-device update — loss, metrics and new params — with
router replay; target alignment and layout errors by hand."""

import functools

import jax
import numpy as np
import pytest

from composer2_jax.episode import Segment, SegmentBuilder, Turn
from composer2_jax.rl.records import EpisodeRecord, GroupRecord
from composer2_jax.rl.services.testing import micro_model_config
from composer2_jax.rl.services.trainer import Trainer, TrainerConfig, target_batch
from composer2_jax.rl.trajectory import pack_segments
from composer2_jax.sharding import MeshConfig
from composer2_jax.train.optim import OptimConfig
from tests.tolerances import FP32_BLOCK, SHARDED_FP32

CFG = micro_model_config()
CFG_RING = micro_model_config(attention_kernel="ring")  # a context-parallel kernel: rows in zigzag on a context mesh
OC = OptimConfig(lr=1e-2, schedule="constant", warmup_steps=0, weight_decay=0.0, clip_norm=1.0)
MESHES = {"fsdp8": (CFG, MeshConfig(fsdp=8)), "data2_expert4": (CFG, MeshConfig(data=2, fsdp=1, expert=4)),
          "data1_fsdp2_expert4": (CFG, MeshConfig(data=1, fsdp=2, expert=4)),
          "fsdp2_context4_ring": (CFG_RING, MeshConfig(fsdp=2, context=4)),  # zigzag rows, ring attention
          "fsdp2_context4_xla": (CFG, MeshConfig(fsdp=2, context=4))}  # natural order, length sharded by GSPMD
ROWS, SEQ = 8, 64


def _episode(rng, reward: float, num_moe: int) -> EpisodeRecord:
    """A two-turn episode with made-up behaviour log-probs and random (valid) recorded experts per position."""
    b = SegmentBuilder(rng.integers(0, 200, 4).tolist(), rng.integers(0, 200, 6).tolist(), [1], 200)
    for turn in range(2):
        n = int(rng.integers(5, 12))
        b.append(rng.integers(0, 200, n).tolist(), True, (-rng.random(n) - 0.1).tolist(), policy_version=0)
        if turn == 0:
            b.append(rng.integers(0, 200, 5).tolist(), False)
    ep = b.finish(reward=reward)
    k, e = CFG.num_experts_per_tok, CFG.n_routed_experts
    routing = [np.argsort(rng.random((num_moe, len(s), e)), axis=-1)[..., :k].astype(np.int32) for s in ep.segments]
    return EpisodeRecord(ep, routing, "t", "easy", reward, reward, 0.0, {}, "submitted", 2, 0, 0, 20, 0.0, 0.0, 0)


def _groups():
    rng = np.random.default_rng(3)
    return [GroupRecord(g, f"t{g}", 0, [_episode(rng, float(r), 1) for r in (1, 0, 1, 0)]) for g in range(2)]


@functools.lru_cache(maxsize=None)
def reference(cfg):
    """One update on a single device: (metrics, host params after, host params before)."""
    t = Trainer(cfg, OC, TrainerConfig(rows=ROWS, seq_len=SEQ), seed=0)
    before = jax.device_get(t.state.params)
    metrics = t.train(_groups())
    return metrics, jax.device_get(t.state.params), before


SLOW_MESHES = ("data2_expert4", "data1_fsdp2_expert4", "fsdp2_context4_ring", "fsdp2_context4_xla")  # CI's slow step


@pytest.mark.parametrize("mesh", [pytest.param(m, marks=pytest.mark.slow) if m in SLOW_MESHES else m for m in MESHES])
def test_sharded_rl_update_matches_single_device(mesh):
    cfg, mesh_cfg = MESHES[mesh]
    metrics0, params0, start = reference(cfg)
    tc = TrainerConfig(rows=ROWS, seq_len=SEQ, devices=8, mesh=mesh_cfg)
    t = Trainer(cfg, OC, tc, seed=0)
    assert t.context == (4 if cfg is CFG_RING else 1)
    t.load_params(start, jax.device_get(t.state.router_state))
    assert len(jax.tree.leaves(t.state.params)[0].sharding.device_set) == 8
    metrics = t.train(_groups())
    for k in ("loss", "pg_loss", "entropy", "kl_old_k3", "behav_ratio_mean", "grad_norm", "tokens"):
        np.testing.assert_allclose(metrics[k], metrics0[k], err_msg=k, **SHARDED_FP32)
    for (path, a), b in zip(jax.tree_util.tree_flatten_with_path(jax.device_get(t.state.params))[0],
                            jax.tree.leaves(params0)):
        np.testing.assert_allclose(a, b, err_msg=jax.tree_util.keystr(path), **FP32_BLOCK)


def test_zigzag_log_probs_come_back_in_token_order():
    """token_logprobs on a context mesh (rows in zigzag on device) equals the single-device values per token."""
    _, _, start = reference(CFG_RING)
    groups = _groups()
    single = Trainer(CFG_RING, OC, TrainerConfig(rows=ROWS, seq_len=SEQ), seed=0)
    ctx = Trainer(CFG_RING, OC, TrainerConfig(rows=ROWS, seq_len=SEQ, devices=8, mesh=MESHES["fsdp2_context4_ring"][1]),
                  seed=0)
    for t in (single, ctx):
        t.load_params(start, jax.device_get(single.state.router_state))
    packed, routing = single.pack(groups)
    a = single.token_logprobs(packed, slice(0, ROWS), routing)
    b = ctx.token_logprobs(packed, slice(0, ROWS), routing)
    m = packed.loss_mask[:ROWS] > 0
    assert m.sum() > 50
    np.testing.assert_allclose(b[m], a[m], **SHARDED_FP32)


def test_target_batch_shifts_within_segments_only():
    turns = (Turn("system", (1, 2), False), Turn("message", (3, 4), True, (-0.1, -0.2), 0))
    seg = Segment(turns)
    packed = pack_segments([(seg, 1.5), (seg, -0.5)], seq_len=5, batch_size=2)  # one segment per row + padding
    t = target_batch(packed, slice(0, 2))
    np.testing.assert_array_equal(t["tokens"][0], [1, 2, 3, 4, 0])
    np.testing.assert_array_equal(t["targets"][0], [2, 3, 4, 0, 0])  # never the padding or the next segment
    np.testing.assert_array_equal(t["loss_mask"][0], [0, 1, 1, 0, 0])
    np.testing.assert_allclose(t["behav_logprobs"][0], [0, -0.1, -0.2, 0, 0])
    np.testing.assert_allclose(t["advantages"][1], [0, -0.5, -0.5, 0, 0])


def test_layouts_that_do_not_split_are_errors_naming_both_numbers():
    with pytest.raises(ValueError, match=r"trainer.rows=4 is not divisible by the trainer mesh's batch axes .* 8"):
        Trainer(CFG, OC, TrainerConfig(rows=4, seq_len=SEQ, devices=8, mesh=MeshConfig(fsdp=8)))
    with pytest.raises(ValueError, match=r"trainer.seq_len=60 is not divisible by 2×context = 8"):
        Trainer(CFG_RING, OC, TrainerConfig(rows=8, seq_len=60, devices=8, mesh=MeshConfig(fsdp=2, context=4)))
