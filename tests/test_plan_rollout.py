"""The rollout side of the RL planner: its byte counts equal the model's and the cache's real sizes, its expected
expert coverage equals a simulation, and the pod split is the best of all splits under its own cost model."""

import dataclasses
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn

from composer2_jax import chips
from composer2_jax.model import Transformer
from composer2_jax.model_config import get_model_config
from composer2_jax.params import count_params
from composer2_jax.plan import cli
from composer2_jax.plan import rollout as pr

H200 = chips.get_chip("h200")


@pytest.fixture(scope="module")
def toy():
    return get_model_config("toy", num_mtp_layers=1)


def test_model_bytes_equal_the_initialised_models(toy):
    params = nn.unbox(Transformer(toy).init(jax.random.key(0), jnp.zeros((1, 4), jnp.int32)))["params"]
    total, active = count_params(params, toy)
    mb = pr.model_bytes(toy)
    assert (mb.total, mb.active) == (total, active)
    routed = sum(leaf.size for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]
                 if re.search(r"\['moe'\]\['(wi_gate|wi_up|wo)'\]", jax.tree_util.keystr(path)))
    assert mb.routed == routed
    assert mb.cached_layers == toy.num_layers + 1


def test_latent_cache_bytes_are_one_latent_and_one_rotary_key_per_cached_layer(toy):
    layers = toy.num_layers + toy.num_mtp_layers
    assert pr.latent_bytes_per_token(toy, cache_bytes=2) == layers * (toy.kv_lora_rank + toy.qk_rope_head_dim) * 2
    kimi = get_model_config("kimi_k2_5", num_mtp_layers=1)
    assert pr.latent_bytes_per_token(kimi) == 62 * 576 * 2  # 71,424 bytes: 61 trunk layers + 1 MTP layer


@pytest.mark.parametrize("experts,top_k,tokens", [(16, 2, 5), (384, 8, 40), (8, 8, 1)])
def test_experts_touched_equals_a_simulation(experts, top_k, tokens):
    rng = np.random.default_rng(0)
    trials = 2000
    picks = np.argsort(rng.random((trials, tokens, experts)), axis=-1)[..., :top_k]  # uniform top-k subsets
    seen = [len(np.unique(p)) for p in picks]
    sim, sem = np.mean(seen), np.std(seen) / math.sqrt(trials)
    assert abs(pr.experts_touched(experts, top_k, tokens) - sim) <= 4 * sem + 1e-9


def test_engine_sizes_cache_pool_and_refuses_an_engine_without_room(toy):
    small = dataclasses.replace(H200, hbm_bytes=2e6)
    mb = pr.model_bytes(toy)
    setup = pr.RolloutSetup(engine_chips=1, context=512, weight_bytes=2, hbm_usable=0.9)
    free = small.hbm_bytes * 0.9 - mb.total * 2
    per_episode = pr.latent_bytes_per_token(toy) * 512
    if free > per_episode:
        eng = pr.rollout_engine(toy, small, setup, mb)
        assert eng["concurrent_episodes"] == min(int(free // per_episode), setup.max_batch)
    tiny = dataclasses.replace(H200, hbm_bytes=mb.total * 2 / 0.9)  # exactly the weights: no room for a cache
    with pytest.raises(ValueError, match="engine_chips"):
        pr.rollout_engine(toy, tiny, setup, mb)
    with pytest.raises(ValueError, match="mean_fill"):
        pr.RolloutSetup(mean_fill=0.0)


def test_decode_step_bound_counts_weights_cache_and_flops(toy):
    mb = pr.model_bytes(toy)
    setup = pr.RolloutSetup(engine_chips=1, context=1024, weight_bytes=2, mean_fill=0.5)
    one, many = pr.decode_step(toy, mb, H200, setup, 1), pr.decode_step(toy, mb, H200, setup, 64)
    # one token reads the non-expert weights and exactly top-k experts per MoE layer
    expect = (mb.total - mb.routed + toy.num_experts_per_tok * mb.moe_layers * mb.expert_params) * 2
    assert one["weight_bytes_read"] == pytest.approx(expect)
    assert many["cache_bytes_read"] == pytest.approx(64 * 512 * pr.latent_bytes_per_token(toy))
    assert many["tokens_per_s"] > one["tokens_per_s"]  # batching amortises the weight reads
    assert many["step_s"] == pytest.approx(max(many["memory_s"], many["compute_s"]) + many["comm_s"])


def test_split_is_the_best_of_every_split_and_staleness_zero_serialises(toy):
    setup = pr.RolloutSetup(engine_chips=8, context=1024, weight_bytes=2)
    work = pr.Workload(samples=64, generated_tokens=512, train_step_s=2.0, train_chips=32, staleness=1)
    plan = pr.split_pod(toy, H200, setup, work, 64)
    rows = plan["ranked"]
    assert [r["train_chips"] for r in sorted(rows, key=lambda r: r["train_chips"])] == list(range(8, 64, 8))
    assert plan["best"]["version_s"] == min(r["version_s"] for r in rows)
    for r in rows:
        assert r["train_s"] == pytest.approx(2.0 * 32 / r["train_chips"])
        assert r["version_s"] == pytest.approx(max(r["train_s"], r["generate_s"]) + r["sync_s"])
    sync = pr.split_pod(toy, H200, setup, dataclasses.replace(work, staleness=0), 64)
    for r in sync["ranked"]:
        assert r["version_s"] == pytest.approx(r["train_s"] + r["generate_s"] + r["sync_s"])
    with pytest.raises(ValueError, match="multiple of 8"):
        pr.split_pod(toy, H200, setup, work, 60)


def test_cli_plans_the_rollout_side_from_a_given_trainer_step(capsys):
    out = cli.main(["--preset", "toy", "--stage", "rl", "--train_step_s", "3.0", "--train_chips", "16",
                    "--batch", "32", "--pod", "32", "--engine_chips", "8", "--seq_len", "2048"])
    assert out["best"]["train_chips"] + out["best"]["rollout_chips"] == 32
    assert out["setup"]["context"] == 2048
    assert "best split of 32 chips" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["--preset", "toy", "--stage", "rl", "--train_step_s", "3.0"])
