"""Trainer and rollout engines on their own meshes (8 fake CPU devices): a version published while a reply is in
flight is resharded from the trainer's mesh onto the engine's and sampled from the next decode step on (per-token
versions), bit-for-bit the trainer's parameters, in both placements — disaggregated (trainer on devices[0:4], two
data-parallel engines on devices[4:6] and [6:8]) and colocated (the same four devices time-shared: engine pools freed
and the optimizer state in host memory in turn); a short real RL loop in each placement; bad placements named."""

import dataclasses
import threading
import time

import jax
import numpy as np
import pytest

from composer2_jax.data import tokenizer as tk
from composer2_jax.infer.testing import random_variables
from composer2_jax.rl.run_config import RLConfig, RLExperimentConfig, check_placement
from composer2_jax.rl.services.rollout import RolloutConfig, RolloutWorker
from composer2_jax.rl.services.testing import micro_model_config
from composer2_jax.rl.services.trainer import Trainer, TrainerConfig
from composer2_jax.rl.services.weights import Weights, WeightStore
from composer2_jax.sharding import MeshConfig
from composer2_jax.train.optim import OptimConfig
from tests.markers import needs_sandbox
from tests.test_rl_sharded import _groups

CFG = micro_model_config(vocab_size=272)  # the byte tokenizer's 267 ids padded to split over tensor=2
OC = OptimConfig(lr=1e-2, schedule="constant", warmup_steps=0, weight_decay=0.0, clip_norm=1.0)
TC = TrainerConfig(rows=8, seq_len=64, devices=4, mesh=MeshConfig(fsdp=2, expert=2))
ENGINE_MESH = MeshConfig(fsdp=1, expert=2, tensor=2)
PLACEMENTS = {  # rollout devices and engine meshes of each placement (the trainer: TC, devices[0:4])
    "disaggregated": RolloutConfig(batch_size=2, prefill_rows=2, prompt_len=32, max_new_tokens=24, first_device=4,
                                   devices=4, replicas=2, mesh=MeshConfig(fsdp=1, expert=2)),
    "colocated": RolloutConfig(batch_size=2, prefill_rows=2, prompt_len=32, max_new_tokens=24, devices=4,
                               mesh=ENGINE_MESH)}
STOP = CFG.vocab_size - 1  # never sampled (vocab_limit): every reply runs to max_new_tokens


def _assert_engine_holds(engine, trainer: Trainer) -> None:
    """The engine's weights are the trainer's, bit for bit, on the engine's own devices."""
    want = jax.device_get(trainer.state.params)
    got = jax.device_get(engine.params)
    for (path, a), b in zip(jax.tree_util.tree_flatten_with_path(want)[0], jax.tree.leaves(got)):
        np.testing.assert_array_equal(b, a, err_msg=jax.tree_util.keystr(path))
    for leaf in jax.tree.leaves(engine.params):
        assert leaf.sharding.device_set == set(engine.devices)


@pytest.mark.parametrize("placement", list(PLACEMENTS))
def test_a_version_published_mid_reply_is_resharded_onto_the_engine_and_sampled_next_step(placement):
    rc = PLACEMENTS[placement]
    check_placement(placement, TC, rc)
    trainer = Trainer(CFG, OC, TC, seed=0)
    store = WeightStore()
    store.publish(trainer.weights())
    worker = RolloutWorker(CFG, store, rc, stop_id=STOP, vocab_limit=STOP)
    prompts = [np.random.default_rng(i).integers(0, 200, 9).tolist() for i in range(2)]
    futs = [worker.submit(p, 20, session=f"episode {i}") for i, p in enumerate(prompts)]
    trainer_devices = set(jax.devices()[:4])
    assert {d for leaf in jax.tree.leaves(trainer.state.params) for d in leaf.sharding.device_set} == trainer_devices
    if placement == "disaggregated":  # the rollouts are stepped here; training happens in between
        for _ in range(5):  # prefill + first token, then 4 decode steps: 5 tokens of each reply under version 0
            worker.step()
        engines = worker.engines
        assert [set(e.devices) for e in engines] == [set(jax.devices()[4:6]), set(jax.devices()[6:8])]
        assert sorted(len(e.sessions) for e in engines) == [1, 1]  # one episode per data-parallel engine
        trainer.train(_groups())
        store.publish(trainer.weights())
        while worker.step():
            pass
    else:  # colocated: the serving thread pauses for the update (pools freed), the optimizer state comes back
        trainer.offload_optimizer()
        assert not trainer.optimizer_resident
        stop = threading.Event()
        worker.start(stop)
        deadline = time.monotonic() + 120
        while (worker.engine is None or worker.engine.stats["generated"] < 6) and time.monotonic() < deadline:
            time.sleep(0.01)
        worker.pause()
        engines = worker.engines
        assert engines[0].suspended and set(engines[0].devices) == trainer_devices
        generated = engines[0].stats["generated"]
        trainer.reload_optimizer()
        trainer.train(_groups())
        store.publish(trainer.weights())
        trainer.offload_optimizer()
        assert engines[0].stats["generated"] == generated  # nothing ran while the trainer held the devices
        worker.resume()
        for f in futs:
            f.result(timeout=120)
        stop.set()
        worker.thread.join(timeout=10)
        assert engines[0].stats["suspensions"] == 1 and not engines[0].suspended
    for f in futs:
        g = f.result()
        first = g.versions.index(1)
        assert len(g.ids) == 20 and g.versions == (0,) * first + (1,) * (20 - first) and first >= 3, g.versions
    for e in engines:
        assert e.version == 1 and len(e.sync_s) == 1
        _assert_engine_holds(e, trainer)


def test_placements_that_do_not_fit_are_named():
    rc = PLACEMENTS["disaggregated"]
    with pytest.raises(ValueError, match=r"trainer devices \[0, 6\) and rollout devices \[4, 8\) .* overlap"):
        check_placement("disaggregated", dataclasses.replace(TC, devices=6), rc)
    with pytest.raises(ValueError, match=r"rollout devices \[0, 1\) .*devices=0\) overlap"):
        check_placement("disaggregated", TC, RolloutConfig())
    with pytest.raises(ValueError, match=r"trainer devices \[0, 4\) and rollout devices \[4, 8\) .* differ"):
        check_placement("colocated", TC, rc)
    with pytest.raises(ValueError, match=r"trainer.devices set \(0 = every device"):
        check_placement("colocated", dataclasses.replace(TC, devices=0), rc)
    with pytest.raises(ValueError, match=r"rl.placement='colocated' .* local backend only"):
        RLConfig(placement="colocated", backend="ray")
    with pytest.raises(ValueError, match=r"rl.placement='mixed'"):
        RLConfig(placement="mixed")
    with pytest.raises(ValueError, match=r"overlap"):  # the whole experiment config checks it
        RLExperimentConfig(rl=RLConfig(placement="disaggregated"), trainer=dataclasses.replace(TC, devices=6),
                           rollout=RolloutConfig(first_device=4, devices=4, replicas=2))
    with pytest.raises(ValueError, match=r"rollout.devices=6 does not split into replicas=4"):
        RolloutConfig(devices=6, replicas=4)
    with pytest.raises(ValueError, match=r"model.vocab_size=267 is not divisible by mesh axes tensor=2"):
        v = random_variables(micro_model_config(), seed=0)
        RolloutWorker(micro_model_config(), WeightStore(Weights(0, v["params"], v["router_state"])),
                      PLACEMENTS["colocated"], stop_id=0).step()




@needs_sandbox
@pytest.mark.slow  # 1–3 minutes each on 2 cores; the core proof of the placements is the test above
@pytest.mark.parametrize("placement", list(PLACEMENTS))
def test_short_rl_loop_in_each_placement(placement, tmp_path):
    """The embedded loop with the real trainer, rollout engines and sandboxes on the micro model: two versions at
    η = 1; afterwards the engines serve the trainer's final weights bit for bit."""
    from composer2_jax import schema
    from composer2_jax.env import Environment
    from composer2_jax.rl import orchestrator
    from composer2_jax.rl.records import Counters
    from composer2_jax.rl.services.env_worker import env_worker_for
    from composer2_jax.rl.services.local import LocalOrchestrator
    from tests.test_rl_ray import micro_config

    c = micro_config(tmp_path)
    c.model = schema.to_config_dict(CFG)
    c.rl.update(backend="local", placement=placement, steps=2)
    c.trainer.update(rows=8, seq_len=256, devices=4, mesh=schema.to_config_dict(TC.mesh))
    rc = PLACEMENTS[placement]
    c.rollout.update(first_device=rc.first_device, devices=rc.devices, replicas=rc.replicas,
                     mesh=schema.to_config_dict(rc.mesh))
    run = orchestrator.rl_config(c)
    tokenizer = run.tokenizer.build()
    trainer = orchestrator.make_trainer(run, tokenizer)
    store, counters = WeightStore(), Counters()
    rollout = RolloutWorker(run.model, store, run.rollout, tokenizer.special_id(tk.IM_END), counters,
                            vocab_limit=trainer.law.vocab_limit)
    with Environment(pool_size=run.env.pool_size, limits=orchestrator.sandbox_limits(run.env)) as env:
        orch = LocalOrchestrator(trainer, rollout, env_worker_for(run, env, tokenizer),
                                 orchestrator.training_curriculum(run), run.rl, store, counters)
        history = orch.run()
    assert trainer.version == 2 and [m["version"] for m in history] == [1, 2]
    assert all(m["staleness_max"] <= 1 for m in history) and counters.get("episodes_done") >= 2 * 2 * 2
    assert trainer.optimizer_resident  # back on the devices for the final checkpoint
    rollout.step()  # the engines pick up the last published version
    assert len(rollout.engines) == rc.replicas
    for e in rollout.engines:
        assert e.version == 2
        _assert_engine_holds(e, trainer)
    if placement == "colocated":  # (a version trained from groups already buffered finds the pools still freed)
        assert rollout.engines[0].stats["suspensions"] >= 1
