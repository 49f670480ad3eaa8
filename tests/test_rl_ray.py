"""The RL services as Ray actors on a local cluster: weights published by version through the registry, episodes on
EnvActors with replies from a RolloutActor, the staleness bound, an EnvActor and a RolloutActor killed mid-run."""

import os
import signal

import pytest

ray = pytest.importorskip("ray")

from composer2_jax import schema  # noqa: E402
from composer2_jax.env import testing as envtest  # noqa: E402
from composer2_jax.rl import orchestrator  # noqa: E402
from composer2_jax.rl.services.testing import micro_model_config  # noqa: E402

pytestmark = pytest.mark.skipif(envtest.host_problem() is not None, reason=f"no sandboxes: {envtest.host_problem()}")


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def micro_config(tmp_path):
    """experiments/rl.py's toy config shrunk to the micro model and a few tiny versions."""
    from experiments import rl as rl_exp

    c = rl_exp.get_config("toy")
    c.model = schema.to_config_dict(micro_model_config())
    c.rollout.num_draft = 0  # the micro model has no MTP depths to draft with
    c.workdir, c.init_from = str(tmp_path / "rl"), ""
    c.rl.update(backend="ray", eta=1, steps=3, groups_per_batch=2, samples=2, eval_every=0, train_tasks=40)
    c.rl.loop.update(episode_threads=8, max_retries=2)
    c.rl.ray.update(rollout_actors=1, env_actors=2)
    c.env.pool_size = 2
    c.rollout.update(batch_size=4, prompt_len=192, max_new_tokens=24)
    c.harness.update(max_new_tokens=24, summary_tokens=16, max_turns=2, context_budget=144)
    c.trainer.update(rows=4, seq_len=256)
    return c


def _actors(cls: str = "EnvActor"):
    """(pid, state) of every actor of class `cls`, from the GCS table (no dashboard needed)."""
    return [(a["Pid"], a["State"]) for a in ray._private.state.actors().values() if a["ActorClassName"] == cls]


def test_ray_backend_trains_publishes_by_version_and_survives_a_killed_env_actor(cluster, tmp_path):
    c = micro_config(tmp_path)
    killed = []

    def kill_an_env_actor_at_version_1(metrics):
        if metrics["version"] == 1 and not killed:
            pid = next(p for p, state in _actors() if state == "ALIVE")
            os.kill(pid, signal.SIGKILL)  # the actor process dies mid-episode; Ray restarts it
            killed.append(pid)

    c.rl.ray.weight_deltas = True  # versions 1.. go to the rollout actor as deltas (bit-exact: weight_delta.py)
    r = orchestrator.run_rl(c, hook=kill_an_env_actor_at_version_1)
    assert r.final_version == 3 and len(r.history) == 3 and killed
    assert 0 < r.counters["weight_bytes_sent"] < r.counters["weight_bytes_full"]
    assert all(m["staleness_max"] <= c.rl.eta for m in r.history)
    assert r.counters["episodes_done"] >= 3 * 2 * 2
    assert r.counters.get("episode_failures", 0) >= 1 and r.counters.get("episodes_retried", 0) >= 1
    assert (tmp_path / "rl" / "checkpoints" / "3").is_dir()
    assert killed[0] not in [p for p, state in _actors() if state == "ALIVE"]  # that process never came back


@pytest.mark.slow
def test_ray_backend_survives_a_rollout_actor_killed_mid_episode(cluster, tmp_path):
    """SIGKILL the RolloutActor's process when version 1 is published, while episodes wait on its replies: those
    episodes fail in the driver and are rerun (none dropped), Ray restarts the actor in a new process, which pulls
    the newest weights, and training reaches its last version with the staleness bound kept."""
    c = micro_config(tmp_path)
    killed, alive_at_end = [], []

    def kill_the_rollout_actor_at_version_1(metrics):
        if metrics["version"] == 1 and not killed:
            pid = next(p for p, state in _actors("RolloutActor") if state == "ALIVE")
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        if metrics["version"] == c.rl.steps:  # before the run's end releases every actor
            alive_at_end.extend(p for p, state in _actors("RolloutActor") if state == "ALIVE")

    r = orchestrator.run_rl(c, hook=kill_the_rollout_actor_at_version_1)
    assert r.final_version == 3 and len(r.history) == 3 and killed
    assert all(m["staleness_max"] <= c.rl.eta for m in r.history)
    assert r.counters.get("episode_failures", 0) >= 1  # episodes were waiting on the killed actor
    assert r.counters["episodes_retried"] == r.counters["episode_failures"]  # each failed episode rerun
    assert r.counters.get("episodes_dropped", 0) == 0
    assert r.counters.get("groups_dropped", 0) <= r.counters.get("episodes_cut_at_stop", 0)
    assert alive_at_end and killed[0] not in alive_at_end  # restarted in a new process, which served versions 2-3


@ray.remote(num_cpus=0, max_concurrency=64)
class ScriptedRolloutActor:
    """RolloutActor's interface with oracle-like scripted replies (rl/services/testing.py): hard toy tasks take a
    read, then the fix, so their episodes have mid-episode boundaries to branch from (a random model ends every
    episode at its first reply)."""

    def __init__(self, model_cfg, rc, stop_id, registry, *rest):
        from composer2_jax.rl.services.ray_actors import RegistryStore
        from composer2_jax.rl.services.testing import ScriptedRollout

        self.rollout = ScriptedRollout(RegistryStore(registry), p_correct=0.5, seed=os.getpid())

    def generate(self, prompt, max_new_tokens):
        return self.rollout.generate(prompt, max_new_tokens)

    def stats(self):
        return {}


@pytest.mark.slow
def test_tree_groups_on_ray_branch_on_the_actor_that_holds_the_snapshot(cluster, tmp_path, monkeypatch):
    """Tree groups under Ray with two EnvActors: a branch can only fork its checkpoint's snapshot in the actor that
    took it (a round-robin pick would send about half the mid-episode branches to the wrong actor: counted
    failures), and each finished group's snapshots are deleted by the actors holding them."""
    from composer2_jax.rl.services import ray_loop

    monkeypatch.setattr(ray_loop, "RolloutActor", ScriptedRolloutActor)
    c = micro_config(tmp_path)
    c.rl.update(group_mode="tree", eta=0, steps=2)
    c.rl.tree.update(initial=2, branches=2, token_budget=600, node_choice="uniform")
    c.harness.update(max_turns=4, max_new_tokens=192, max_total_tokens=1024, context_budget=1024, max_summaries=0)
    c.rollout.update(prompt_len=1088, max_new_tokens=192)
    c.trainer.update(rows=8, seq_len=1344)
    r = orchestrator.run_rl(c)
    assert r.final_version == 2 and all(m["staleness_max"] == 0 for m in r.history)
    assert r.counters.get("episode_failures", 0) == 0  # no branch sent to an actor without its snapshot
    in_flight_at_stop = r.counters["groups_admitted"] - 2 * 2  # admitted beyond the 2 × 2 consumed ones
    assert r.counters.get("groups_dropped", 0) <= in_flight_at_stop
    assert r.counters["tree_branches"] >= 2 * 2  # the consumed groups grew beyond their initial episodes
    taken, released = r.counters["tree_checkpoints"], r.counters.get("tree_snapshots_released", 0)
    assert taken >= 2 and 0 < released <= taken  # deleted by their actors (in-flight groups' died with them)


@pytest.mark.slow
def test_ray_backend_evaluates_in_its_own_actor(cluster, tmp_path):
    """The evaluator under Ray: an EvalActor with its own environment evaluates versions 0 and 2 (the last) from its
    own registry while the driver trains; results come back through the driver's writer."""
    c = micro_config(tmp_path)
    c.rl.update(steps=2, eval_every=2, eval_tasks=4, eval_samples=1)
    r = orchestrator.run_rl(c)
    assert r.final_version == 2 and [e["eval/version"] for e in r.evals] == [0.0, 2.0]
    assert all(e["eval/episodes"] == 4 for e in r.evals)
    assert not [a for a in ray._private.state.actors().values()
                if a["ActorClassName"] == "EvalActor" and a["State"] == "ALIVE"]  # released at the end
    lines = (tmp_path / "rl" / "logs" / "metrics.jsonl").read_text().splitlines()
    assert sum('"eval/pass_rate"' in line for line in lines) == 2


@pytest.mark.slow  # ~70 s on 2 cores (the actor process starts JAX and compiles its engine)
def test_a_rollout_actor_owns_its_devices_and_serves_the_trainers_weights(cluster):
    """Two processes: the trainer here (devices[0:4] of this process's 8) publishes through the registry; a
    RolloutActor process with 4 XLA host devices of its own shards its engine (expert=2 × tensor=2) over them, and
    after each publication serves the trainer's parameters bit for bit, sampling with the new version."""
    import jax
    import numpy as np

    from composer2_jax.rl.run_config import RayConfig
    from composer2_jax.rl.services.ray_actors import RolloutActor, WeightRegistry, host_weights
    from composer2_jax.rl.services.ray_loop import rollout_actor_options
    from composer2_jax.rl.services.trainer import Trainer
    from tests.test_rl_placement import CFG, OC, PLACEMENTS, STOP, TC
    from tests.test_rl_sharded import _groups

    trainer = Trainer(CFG, OC, TC, seed=0)
    registry = WeightRegistry.remote()
    ray.get(registry.publish.remote(host_weights(trainer.weights())))
    options = rollout_actor_options(RayConfig(rollout_host_devices=4))
    actor = RolloutActor.options(**options).remote(CFG, PLACEMENTS["colocated"], STOP, registry, STOP)
    prompt = list(range(3, 12))
    assert ray.get(actor.generate.remote(prompt, 6), timeout=300).versions == (0,) * 6
    trainer.train(_groups())
    ray.get(registry.publish.remote(host_weights(trainer.weights())))
    assert ray.get(actor.generate.remote(prompt, 6), timeout=300).versions == (1,) * 6
    where = ray.get(actor.placement.remote())
    assert where["pid"] != os.getpid() and where["devices"] == 4 and jax.device_count() == 8
    assert where["engines"] == [[0, 1, 2, 3]]  # the actor's own four devices
    [(version, params, sync_s)] = ray.get(actor.engine_weights.remote())
    assert version == 1 and len(sync_s) == 1
    want = jax.device_get(trainer.state.params)
    for (path, a), b in zip(jax.tree_util.tree_flatten_with_path(want)[0], jax.tree.leaves(params)):
        np.testing.assert_array_equal(b, a, err_msg=jax.tree_util.keystr(path))
    ray.kill(actor)


def test_weight_deltas_through_the_registry_are_bit_exact_and_a_missed_version_resyncs_in_full(cluster):
    """The object-store path with deltas: the publisher sends version 0 in full and later versions as deltas; a reader
    that held the previous version applies the delta (bit for bit), one that missed a version fetches the newest in
    full; a registry that lost its state (restarted) gets the version in full."""
    import jax
    import numpy as np

    from composer2_jax.rl.services.ray_actors import RegistryPublisher, RegistryStore, WeightRegistry
    from composer2_jax.rl.services.weights import Weights

    rng = np.random.default_rng(0)
    params = {"w": rng.normal(size=(128, 64)).astype(np.float32), "b": np.zeros(64, np.float32)}
    versions = [Weights(0, params, {"bias": np.zeros(8, np.float32)})]
    for v in range(1, 5):  # an update touching 1/16 of w's rows and every bias: like a sparse expert update
        p = {k: x.copy() for k, x in versions[-1].params.items()}
        p["w"][rng.choice(128, 8, replace=False)] += rng.normal(size=(8, 64)).astype(np.float32) * 1e-2
        versions.append(Weights(v, p, {"bias": versions[-1].router_state["bias"] + np.float32(v)}))

    def holds(got: Weights, want: Weights) -> None:
        assert got.version == want.version
        leaves = zip(jax.tree.leaves((got.params, got.router_state)), jax.tree.leaves((want.params, want.router_state)))
        for a, b in leaves:
            np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))

    registry = WeightRegistry.remote()
    publisher, store = RegistryPublisher(registry, deltas=True), RegistryStore(registry, deltas=True)
    publisher.publish(versions[0])
    holds(store.latest(), versions[0])
    publisher.publish(versions[1])
    holds(store.latest(), versions[1])
    assert store.counters.snapshot() == {"weight_syncs_full": 1, "weight_syncs_delta": 1,
                                         "weight_bytes_received": store.counters.get("weight_bytes_received")}
    publisher.publish(versions[2])
    publisher.publish(versions[3])  # the reader never read version 2
    holds(store.latest(), versions[3])
    assert store.counters.get("weight_syncs_full") == 2 and store.counters.get("weight_syncs_delta") == 1
    full = publisher.counters.get("weight_bytes_full")
    assert full == 4 * (128 * 64 + 64 + 8) * 4 and publisher.counters.get("weight_bytes_sent") < full / 2
    publisher.registry = WeightRegistry.remote()  # a restarted registry holds nothing to apply a delta to
    sent = publisher.counters.get("weight_bytes_sent")
    publisher.publish(versions[4])
    assert publisher.counters.get("weight_bytes_sent") - sent == full // 4  # version 4 went in full
    holds(ray.get(publisher.registry.latest.remote()), versions[4])
