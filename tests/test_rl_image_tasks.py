"""RL on image tasks (rl/image_tasks.py, rl/services/env_worker.py): Dockerfile, multi-step and docker-compose Harbor
tasks run through the evaluator's sandboxes, with the deploy harness's tools and budgets scaled to the model's
context; the oracle's episodes earn success 1 and the null agent's 0. Images: the fixtures' base (cache hits)."""

import dataclasses
import shutil
from pathlib import Path

import pytest

from composer2_jax import schema
from composer2_jax.bench.policies import scripted_factory
from composer2_jax.bench.runner import step_view
from composer2_jax.data import tokenizer as tk
from composer2_jax.env import Environment, SandboxConfig, SandboxLimits
from composer2_jax.env.harness import HarnessConfig
from composer2_jax.env.tool_schemas import TOOL_NAMES
from composer2_jax.rl import orchestrator, sources
from composer2_jax.rl.rewards import RewardConfig
from composer2_jax.rl.services.env_worker import EnvWorker, env_worker_for, harbor_harness
from experiments import rl as rl_experiment
from tests.test_bench_compose import compose_task
from tests.test_env_images import ON_CI, PROBLEM, needs_images

HARBOR = Path(__file__).parent / "data" / "harbor"
TOK = tk.ByteTokenizer()
CFG = HarnessConfig(max_turns=8, max_new_tokens=32_768, max_total_tokens=200_000, context_budget=65_536)


def image_suite(root: Path) -> Path:
    """A small suite of image tasks: a Dockerfile task, a two-step task and a two-service compose task."""
    for name in ("http-service", "multi-step"):
        shutil.copytree(HARBOR / name, root / name)
    compose_task(root, "kv")
    return root


def test_suite_sources_keep_image_compose_and_step_tasks(tmp_path):
    got = sources.harbor_tasks(sources.SourceSpec("suite", "img", 1.0), image_suite(tmp_path), "train", 0.0)
    assert [t.task_id.split("/", 1)[1] for t in got.tasks] == [
        "http-service", "kv", "multi-step/create", "multi-step/extend"]
    assert got.skipped == {}
    extend = got.tasks[3]
    assert extend.step == 1 and extend.instruction == (HARBOR / "multi-step/steps/extend/instruction.md").read_text()
    shutil.rmtree(tmp_path / "multi-step" / "steps" / "create" / "solution")  # step 2 can no longer be reached
    got = sources.harbor_tasks(sources.SourceSpec("suite", "img", 1.0), tmp_path, "train", 0.0)
    assert "no solution/solve.sh" in got.skipped["multi-step/extend"]


def test_harbor_families_get_the_deploy_tools_and_budgets_from_the_model_context():
    c = rl_experiment.get_config("toy")
    c.tasks = "toy@1,suite:v0@1"
    c.rollout.update(prompt_len=4096, max_new_tokens=512)
    c.trainer.seq_len = 4800
    run = orchestrator.rl_config(c)
    h = harbor_harness(run, TOK)
    window = min(run.model.max_position_embeddings, 4096 + 512, 4800)
    assert h.max_new_tokens == min(512, window // 8) and h.summary_tokens == min(h.max_new_tokens, window // 16)
    assert h.context_budget > 1030 * 3 and h.context_budget > run.harness.context_budget  # not the toy's 260
    orchestrator.check_shapes(h, run.rollout, run.trainer.seq_len, TOK)  # fits the engine and the trainer rows
    assert run.env.harbor_tools == TOOL_NAMES
    small = dataclasses.replace(run, model=dataclasses.replace(run.model, max_position_embeddings=1024))
    assert harbor_harness(small, TOK).max_new_tokens == 128  # scales with the model's context
    c.env.harbor_tools = ("read_file", "shell")
    with pytest.raises(ValueError, match=r"env tools \['shell'\] are unknown"):
        orchestrator.rl_config(c)


@pytest.fixture(scope="module")
def env():
    if PROBLEM is not None:
        if ON_CI:
            pytest.fail(f"CI=true but images cannot be built here: {PROBLEM}")
        pytest.skip(PROBLEM)
    e = Environment(config=SandboxConfig(image_pool_size=2), limits=SandboxLimits(timeout_s=60))
    yield e
    e.shutdown()


@needs_images
def test_image_compose_and_step_tasks_train_through_the_env_worker(env, tmp_path):
    got = sources.harbor_tasks(sources.SourceSpec("suite", "img", 1.0), image_suite(tmp_path / "suite"), "train",
                               0.0)
    worker = EnvWorker(env, TOK, CFG, RewardConfig(penalty_coef=0.0), ("read_file",), repo_root=tmp_path / "repos")
    worker.set_family("suite", TOOL_NAMES, CFG)  # the deploy harness's tools (the oracle runs solve.sh in a terminal)
    for task in got.tasks:
        view = step_view(task.task, task.run_step())
        records = {agent: worker.run(task, scripted_factory(agent, TOK, CFG)(view), admitted_version=0)
                   for agent in ("oracle", "null")}
        assert records["oracle"].success == 1.0, (task.task_id, records["oracle"])
        assert records["null"].success == 0.0, (task.task_id, records["null"])
        assert records["oracle"].source == "suite:img"
        assert env.sandboxes() == [], task.task_id  # every sandbox (every service's) closed with the episode
    worker.close()


@needs_images
def test_warm_start_transcripts_replay_solutions_or_come_from_a_jsonl(env, tmp_path):
    import json

    from composer2_jax.rl.services.oracle import read_transcripts, write_solution_transcripts

    got = sources.harbor_tasks(sources.SourceSpec("suite", "img", 1.0), image_suite(tmp_path / "suite"), "train",
                               0.0)
    worker = EnvWorker(env, TOK, CFG, RewardConfig(penalty_coef=0.0), ("read_file",), repo_root=tmp_path / "repos")
    worker.set_family("suite", TOOL_NAMES, CFG)
    out = tmp_path / "demos.jsonl"
    assert write_solution_transcripts(worker, got.tasks, out, threads=2) == {"written": 4, "failed": 0,
                                                                              "no_solution": 0}
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["task_id"] for r in rows) == sorted(t.task_id for t in got.tasks)
    for r in rows:  # solve.sh ran as terminal tool calls; the sandbox's real answers are the observations
        calls = [c["name"] for m in r["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or ()]
        assert "run_terminal_cmd" in calls and calls[-1] == "submit", calls
        assert r["messages"][-1]["role"] == "assistant" and len(r["messages"]) > 3
    assert read_transcripts(out) == 4
    bad = tmp_path / "bad.jsonl"
    bad.write_text(out.read_text().splitlines()[0] + "\n{\"text\": \"x\"}\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: expected \{\"messages\""):
        read_transcripts(bad)
    worker.close()


def test_ray_installs_as_a_named_extra_and_yaml_with_the_runtime():
    import tomllib

    root = Path(__file__).parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert any(r.startswith("ray>=") for r in project["optional-dependencies"]["ray"])
    runtime = [line.split(">")[0].strip() for line in (root / "requirements.txt").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    assert "pyyaml" in runtime and project["dynamic"] == ["dependencies"]


@pytest.mark.slow
@needs_images
def test_short_rl_run_on_an_image_task_suite(tmp_path):
    """A few versions of the toy preset (micro model) on Dockerfile, multi-step and compose tasks, end to end."""
    import json

    from composer2_jax.rl.services.testing import micro_model_config

    c = rl_experiment.get_config("toy")
    c.model = schema.to_config_dict(micro_model_config())
    c.rollout.num_draft = 0
    c.workdir, c.init_from = str(tmp_path / "rl"), ""
    c.tasks = f"suite:{image_suite(tmp_path / 'suite')}"
    c.sources.update(heldout_frac=0.0, eval_tasks=1)
    c.rl.update(steps=2, groups_per_batch=2, samples=2, eval_every=0, plot=False)
    c.rl.loop.update(episode_threads=4)
    c.env.pool_size = 0
    c.rollout.update(batch_size=4, prompt_len=3072, max_new_tokens=24)
    c.trainer.update(rows=4, seq_len=3200)
    c.harness.update(max_turns=2, max_new_tokens=24, summary_tokens=16)
    run = orchestrator.rl_config(c)
    assert harbor_harness(run, TOK).context_budget > 2000
    r = orchestrator.run_rl(c)
    assert r.final_version == 2
    lines = [json.loads(x) for x in (tmp_path / "rl" / "logs" / "metrics.jsonl").read_text().splitlines()]
    versions = [m for m in lines if "batch/reward" in m]
    assert len(versions) == 2 and r.counters.get("episodes_done", 0) >= 8
    env_worker_for(run, None, TOK)  # the run's worker wiring holds for the suite kind
