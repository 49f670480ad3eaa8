"""The RL services as Ray actors on a local cluster: weights published by version through the registry, episodes on
EnvActors with replies from a RolloutActor, the staleness bound, and an EnvActor killed mid-run."""

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
    c.workdir, c.init_from = str(tmp_path / "rl"), ""
    c.rl.update(backend="ray", eta=1, steps=3, groups_per_batch=2, samples=2, eval_every=0, train_tasks=40)
    c.rl.loop.update(episode_threads=8, max_retries=2)
    c.rl.ray.update(rollout_actors=1, env_actors=2)
    c.env.pool_size = 2
    c.rollout.update(batch_size=4, prompt_len=192, max_new_tokens=24)
    c.harness.update(max_new_tokens=24, summary_tokens=16, max_turns=2, context_budget=144)
    c.trainer.update(rows=4, seq_len=256)
    return c


def _env_actors():
    """(pid, state) of every EnvActor, from the GCS table (no dashboard needed)."""
    return [(a["Pid"], a["State"]) for a in ray._private.state.actors().values() if a["ActorClassName"] == "EnvActor"]


def test_ray_backend_trains_publishes_by_version_and_survives_a_killed_env_actor(cluster, tmp_path):
    c = micro_config(tmp_path)
    killed = []

    def kill_an_env_actor_at_version_1(metrics):
        if metrics["version"] == 1 and not killed:
            pid = next(p for p, state in _env_actors() if state == "ALIVE")
            os.kill(pid, signal.SIGKILL)  # the actor process dies mid-episode; Ray restarts it
            killed.append(pid)

    r = orchestrator.run_rl(c, hook=kill_an_env_actor_at_version_1)
    assert r.final_version == 3 and len(r.history) == 3 and killed
    assert all(m["staleness_max"] <= c.rl.eta for m in r.history)
    assert r.counters["episodes_done"] >= 3 * 2 * 2
    assert r.counters.get("episode_failures", 0) >= 1 and r.counters.get("episodes_retried", 0) >= 1
    assert (tmp_path / "rl" / "checkpoints" / "3").is_dir()
    assert killed[0] not in [p for p, state in _env_actors() if state == "ALIVE"]  # that process never came back


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
