"""Task sources for RL (rl/sources.py): the curriculum string, train / held-out splits by task and by version, the
weighted resumable sampler, and Harbor tasks (suite v0, generated folders) through the same EnvWorker path as the
toy family (sandbox, harness, grading by the task's own verdict, reward)."""

import collections
import random
import shutil

import pytest

from composer2_jax.bench.policies import scripted_factory
from composer2_jax.bench.task import load_suite
from composer2_jax.data import tokenizer as tk
from composer2_jax.env import Environment, SandboxLimits
from composer2_jax.env.harness import HarnessConfig
from composer2_jax.rl import orchestrator, sources
from composer2_jax.rl.curriculum import Curriculum, TaskCurriculum
from composer2_jax.rl.rewards import RewardConfig
from composer2_jax.rl.run_config import RLExperimentConfig
from composer2_jax.rl.services.env_worker import EnvWorker
from experiments import rl as rl_experiment
from tests.markers import needs_sandbox

TOK = tk.ByteTokenizer()


def test_curriculum_strings_parse_and_bad_ones_name_the_entry():
    specs = sources.parse_mix("toy@2, suite:v0, generated:runs/gen@0.5")
    assert [(s.kind, s.arg, s.weight) for s in specs] == [("toy", "", 2.0), ("suite", "v0", 1.0),
                                                         ("generated", "runs/gen", 0.5)]
    assert [s.name for s in specs] == ["toy", "suite:v0", "generated:runs/gen"]
    for bad, match in [("toys", "unknown kind 'toys'"), ("suite", "suite needs :FOLDER"), ("toy:x", "no argument"),
                       ("toy@0", "weight '0'"), ("toy@x", "weight 'x'"), ("", "names no source"),
                       ("toy,toy", "twice")]:
        with pytest.raises(ValueError, match=match):
            sources.parse_mix(bad)
    with pytest.raises(ValueError, match="unknown kind 'nope'"):
        RLExperimentConfig(tasks="toy,nope@1")  # a bad --config.tasks fails when the config is built


def test_suite_splits_by_task_and_holds_out_whole_versions():
    spec = sources.SourceSpec("suite", "v0", 1.0)
    train = sources.harbor_tasks(spec, "v0", "train", 0.2)
    held = sources.harbor_tasks(spec, "v0", "heldout", 0.2)

    def names(got):
        return {t.task.name for t in got.tasks}

    runnable = {t.name for t in load_suite("v0").tasks if not t.is_image and not t.steps}
    assert names(train) & names(held) == set() and names(train) | names(held) == runnable
    assert 0.1 < len(held.tasks) / len(runnable) < 0.35  # ≈ heldout_frac, by a hash of the name
    assert names(held) == names(sources.harbor_tasks(spec, "v0", "heldout", 0.2))  # stable
    assert all(t.task_id == f"suite:v0/{t.task.name}" and t.source == "suite:v0" for t in train.tasks)
    whole = sources.harbor_tasks(spec, "v0", "heldout", 0.2, heldout_versions=("v0",))
    assert names(whole) == runnable and sources.harbor_tasks(spec, "v0", "train", 0.2, ("v0",)).tasks == ()


def test_run_config_selects_sources_and_held_out_sets():
    c = rl_experiment.get_config("toy")  # as `--config.tasks=toy@3,suite:v0@1 --config.sources.eval_tasks=4` sets it
    c.tasks, c.sources.eval_tasks = "toy@3,suite:v0@1", 4
    run = orchestrator.rl_config(c)
    sampler = orchestrator.training_curriculum(run)
    drawn = collections.Counter(sampler.next().source for _ in range(400))
    assert set(drawn) == {"toy", "suite:v0"} and 0.68 < drawn["toy"] / 400 < 0.82  # ∝ 3 : 1
    held = orchestrator.heldout_tasks(run)
    by_source = collections.Counter(t.source for t in held)
    assert by_source == {"toy": run.rl.eval_tasks, "suite:v0": 4}
    train_ids = {t.task_id for t in sampler.tasks[1]}
    assert not train_ids & {t.task_id for t in held}  # nothing held out is trained on


def test_a_task_held_out_by_one_source_is_never_trained_from_another(tmp_path):
    folder = tmp_path / "gen"
    v0 = load_suite("v0").path
    shutil.copytree(v0 / "gen1-shlex-quote", folder / "gen1-shlex-quote")  # a generated copy of a v0 task
    shutil.copytree(v0 / "gen1-shlex-quote", folder / "gen9-other")  # and a task v0 does not have
    c = rl_experiment.get_config("toy")
    c.tasks = f"generated:{folder}"
    c.sources.update(heldout_frac=0.0, heldout_versions=("v0",), eval_tasks=4)
    run = orchestrator.rl_config(c)
    assert [t.task.name for t in orchestrator.training_curriculum(run).tasks[0]] == ["gen9-other"]
    assert collections.Counter(t.source for t in orchestrator.heldout_tasks(run)) == {"suite:v0": 4}


def test_sampler_is_weighted_resumable_and_one_source_keeps_the_old_order():
    a, b = [f"a{i}" for i in range(7)], [f"b{i}" for i in range(3)]
    s = Curriculum([(a, 1.0), (b, 1.0)], seed=5)
    first = [s.next() for _ in range(50)]
    resumed = Curriculum([(a, 1.0), (b, 1.0)], seed=5, position=20)
    assert [resumed.next() for _ in range(30)] == first[20:]
    drawn_b = [x for x in first if x.startswith("b")]
    assert sorted(drawn_b[:3]) == b and sorted(drawn_b[3:6]) == b  # each source cycles through all its tasks
    old = []  # the single-list sampler before curricula: epoch e is a seeded shuffle "seed-e" of the list
    for epoch in range(3):
        order = list(range(7))
        random.Random(f"5-{epoch}").shuffle(order)
        old += [a[i] for i in order]
    t = TaskCurriculum(a, seed=5)
    assert [t.next() for _ in range(21)] == old
    with pytest.raises(ValueError, match="empty"):
        Curriculum([(a, 1.0), ([], 1.0)])


# ------------------------------------------------------------------------------------------------ through EnvWorker


@pytest.fixture(scope="module")
def env():
    e = Environment(pool_size=2, limits=SandboxLimits(timeout_s=60))
    yield e
    e.shutdown()


CFG = HarnessConfig(max_turns=8, max_new_tokens=32_768, max_total_tokens=200_000, context_budget=65_536)
TOOLS = ("read_file", "edit_file", "write_file", "run_terminal_cmd", "todo_write", "submit")


@needs_sandbox
@pytest.mark.parametrize("kind, name", [("suite", "bug-config-equals"), ("generated", "gen1-shlex-quote")])
def test_harbor_tasks_run_grade_and_reward_through_the_env_worker(env, tmp_path, kind, name):
    if kind == "suite":
        spec = sources.SourceSpec("suite", "v0", 1.0)
        got = sources.harbor_tasks(spec, "v0", "train", 0.0)
    else:  # a generated folder that already holds tasks is loaded as it is (no generation)
        folder = tmp_path / "gen"
        shutil.copytree(load_suite("v0").path / name, folder / name)
        got = sources.generated_tasks(sources.SourceSpec("generated", str(folder), 1.0), "train",
                                      sources.SourcesConfig(heldout_frac=0.0, generated_count=10, generated_seed=0))
    task = next(t for t in got.tasks if t.task.name == name)
    worker = EnvWorker(env, TOK, CFG, RewardConfig(penalty_coef=0.0), TOOLS, schemas_in_prompt=False,
                       repo_root=tmp_path / "repos")
    records = {agent: worker.run(task, scripted_factory(agent, TOK, CFG)(task.task), admitted_version=0)
               for agent in ("oracle", "null")}
    assert records["oracle"].success == 1.0 and records["oracle"].reward == pytest.approx(1.0, abs=0.1)
    assert records["null"].success == 0.0 and records["null"].reward <= 0.0
    assert records["oracle"].source == task.source and env.sandboxes() == []


def _stdlib_tests() -> bool:
    from composer2_jax.bench.authoring import generate_stdlib as generate

    return any((d / "test" / "test_shlex.py").is_file() for d in generate.stdlib_dirs())


@pytest.mark.slow
@needs_sandbox
@pytest.mark.skipif(not _stdlib_tests(), reason="the generator needs the standard library's Lib/test")
def test_short_rl_run_on_a_mixed_curriculum_logs_every_reward_term(tmp_path):
    """Issue 17 item 5(b): a few versions on toy + suite v0 (train split) + generated tasks, end to end."""
    import json

    from composer2_jax import schema
    from composer2_jax.rl.rewards import TERMS
    from composer2_jax.rl.services.testing import micro_model_config

    c = rl_experiment.get_config("toy")
    c.model = schema.to_config_dict(micro_model_config())
    c.rollout.num_draft = 0  # the micro model has no MTP depths to draft with
    c.workdir, c.init_from = str(tmp_path / "rl"), ""
    c.tasks = f"toy@1,suite:v0@1,generated:{tmp_path / 'gen'}@1"
    c.sources.update(eval_tasks=1, generated_count=2, generated_modules=("shlex", "textwrap"))
    c.rl.update(steps=2, groups_per_batch=3, samples=2, eval_every=2, eval_tasks=2, eval_samples=1, plot=False)
    c.rl.loop.update(episode_threads=6)
    c.env.tools = ("read_file", "edit_file", "write_file", "run_terminal_cmd", "todo_write", "submit")
    c.rollout.update(batch_size=4, prompt_len=1536, max_new_tokens=24)  # v0 instructions are up to ~1 KB
    c.harness.update(max_new_tokens=24, summary_tokens=16, max_turns=2, context_budget=1400)
    c.trainer.update(rows=6, seq_len=1600)
    r = orchestrator.run_rl(c)
    assert r.final_version == 2 and [e["eval/version"] for e in r.evals] == [0.0, 2.0]
    lines = [json.loads(line) for line in (tmp_path / "rl" / "logs" / "metrics.jsonl").read_text().splitlines()]
    versions = [m for m in lines if "batch/reward" in m]
    assert len(versions) == 2
    for m in versions:  # every term, mean and fraction non-zero, every version
        assert {f"batch/term/{t}" for t in TERMS} | {f"batch/term_nonzero/{t}" for t in TERMS} <= set(m)
    evaluated = {k.split("/source/", 1)[1] for k in r.evals[-1] if k.startswith("eval/pass_rate/source/")}
    assert evaluated == {"toy", "suite:v0", f"generated:{tmp_path / 'gen'}"}
    trained = {k.split("/source/", 1)[1] for m in versions for k in m if k.startswith("batch/episodes/source/")}
    assert "toy" in trained and len(trained) >= 2
    print(json.dumps({k: round(v, 4) for k, v in versions[-1].items() if "/term" in k or "/source/" in k}))


# ------------------------------------------------------------------------------------------------ any package

def test_a_package_is_opened_by_name_folder_or_archive_and_must_be_pure_python(tmp_path):
    from composer2_jax.bench.authoring import generate_package as gp

    pasta = gp.open_package("pasta")  # installed (google-pasta): unittest tests beside its modules
    assert pasta.name == "pasta" and (pasta.root / "__init__.py").is_file()
    assert {t.name for t in pasta.tests} >= {"ast_utils_test.py", "import_utils_test.py"}
    assert gp.open_package(str(pasta.root)).root == pasta.root
    wheel = tmp_path / "pasta-0-py3-none-any.whl"  # a wheel is unpacked into the cache
    shutil.make_archive(str(wheel.with_suffix("")), "zip", pasta.root.parent, "pasta")
    wheel.with_suffix(".zip").rename(wheel)
    opened = gp.open_package(str(wheel), tmp_path / "cache")
    assert opened.root.is_relative_to(tmp_path / "cache") and len(opened.tests) == len(pasta.tests)
    native = tmp_path / "native" / "fast"
    native.mkdir(parents=True)
    (native / "__init__.py").write_text("")
    (native / "_speedups.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    with pytest.raises(ValueError, match=r"is not pure Python: extension modules \['_speedups"):
        gp.open_package(str(native))
    with pytest.raises(ValueError, match="not a folder, wheel or sdist, nor an importable package"):
        gp.open_package("no_such_package_anywhere")
    two = tmp_path / "sdist"
    for name in ("a", "b"):
        (two / name).mkdir(parents=True)
        (two / name / "__init__.py").write_text("")
    with pytest.raises(ValueError, match=r"expected one top-level package .* found \['a', 'b'\]"):
        gp.open_package(str(two))
    assert gp.open_package(f"{two}::b").name == "b"


def test_package_imports_are_renamed_to_the_vendored_copy():
    from composer2_jax.bench.authoring.generate_package import rename_imports

    src = ("import pasta\nimport pasta.base.ast_utils\nfrom pasta.augment import rename\n  from pasta import x\n"
           "import pasta.base as pb\nimport pastary\ns = '''\nimport a\n'''\n")
    assert rename_imports(src, "pasta") == (
        "import vendored_pasta as pasta\nimport vendored_pasta.base.ast_utils; import vendored_pasta as pasta\n"
        "from vendored_pasta.augment import rename\n  from vendored_pasta import x\n"
        "import vendored_pasta.base as pb\nimport pastary\ns = '''\nimport a\n'''\n")
    assert rename_imports("import os, pasta\n", "pasta") is None  # unrenamable: the candidate is not used
    assert rename_imports("m = importlib.import_module('pasta.base')\n", "pasta") is None


@needs_sandbox
def test_tasks_generated_from_an_installed_package_grade_oracle_1_and_forgers_0(env, tmp_path):
    """The feature-deletion generator on a real third-party package (google-pasta, installed): the task's hidden
    check is the package's own tests with the function traced, judged outside the code's reach; the oracle scores
    1, the untouched start and forging policies 0, through the RL source and the EnvWorker."""
    from composer2_jax.bench.authoring import forgeries as forging
    from composer2_jax.rl.grading import grade_episode

    spec = sources.SourceSpec("generated", str(tmp_path / "gen"), 1.0)
    got = sources.generated_tasks(spec, "train", sources.SourcesConfig(
        heldout_frac=0.0, generated_count=1, generated_seed=0, generated_packages=("pasta",), generated_per_module=1))
    assert len(got.tasks) == 1 and got.tasks[0].task.name.startswith("pkg1-pasta-")
    task = got.tasks[0]
    repo = task.repo_dir(tmp_path / "cache")
    assert (repo / "vendored_pasta" / "__init__.py").is_file() and not (repo / "pasta").exists()
    import tomllib

    meta = tomllib.loads((tmp_path / "gen" / task.task.name / "task.toml").read_text())["metadata"]
    left = list(repo.rglob("*_test.py"))  # the package's other test modules stay; none that exercises the function
    assert left and not any(meta["function"] in p.read_text() for p in left)
    deleted_from = repo / "vendored_pasta" / meta["source"].split("/pasta/")[1]
    assert f"def {meta['function']}(" not in deleted_from.read_text()
    worker = EnvWorker(env, TOK, CFG, RewardConfig(penalty_coef=0.0), TOOLS, schemas_in_prompt=False,
                       repo_root=tmp_path / "repos")
    records = {agent: worker.run(task, scripted_factory(agent, TOK, CFG)(task.task), admitted_version=0)
               for agent in ("oracle", "null")}
    assert records["oracle"].success == 1.0 and records["null"].success == 0.0
    for policy in ("atexit", "os_exit", "shadow_modules", "monkeypatch", "forge_answers"):
        source = env.import_repo(forging.forged_copy(repo, policy, tmp_path / policy))
        try:
            g = grade_episode(env, source, task)
        finally:
            env.delete_snapshot(source)
        assert g.reward == 0.0, (policy, g)
    assert env.sandboxes() == []
