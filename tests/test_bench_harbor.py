"""Harbor semantics of the benchmark: task.toml, reward files, image tasks graded on the agent's files with none of
its processes alive,
multi-step tasks, and errors that say what happened. Fixtures: tests/data/harbor (Harbor's published format).

Image tasks share the images built by tests/test_env_images.py's fixtures (one base, cached across sessions).
"""

import json
import logging
import re
import shutil
from pathlib import Path

import pytest

from composer2_jax.bench import policies
from composer2_jax.bench.grade import parse_rewards, scalar_reward, startup_failure
from composer2_jax.bench.runner import SnapshotCache, TrialOptions, min_reward_miss, run_suite
from composer2_jax.bench.task import (
    Task,
    TaskError,
    Unsupported,
    load_suite,
    load_task,
    resolve_env,
)
from composer2_jax.bench.task_config import parse_task_toml
from composer2_jax.env import Environment, SandboxConfig, SandboxLimits
from composer2_jax.env.harness import HarnessConfig
from tests.test_env_images import ON_CI, PROBLEM, needs_images

HARBOR = Path(__file__).parent / "data" / "harbor"
FULL_TOML = """schema_version = "1.1"
multi_step_reward_strategy = "final"
frobnicate = 1

[task]
name = "acme/full"
keywords = ["x"]

[metadata]
difficulty = "hard"
anything = { nested = true }

[verifier]
timeout_sec = 45.0
user = "tester"
env = { TOKEN = "${COMPOSER2_TEST_TOKEN:-fallback}", PLAIN = "p" }

[agent]
timeout_sec = 1800.0
user = 1000

[environment]
build_timeout_sec = 1200.0
cpus = 2
memory = "4G"
storage = "20G"
network_mode = "allowlist"
allowed_hosts = ["PyPI.org", "files.pythonhosted.org"]
workdir = "/srv"
env = { MODE = "test" }
mcp_servers = [{ name = "x", url = "http://x" }]
healthcheck = { command = "true", retries = 5 }
wobble = "?"

[solution]
env = { SECRET = "${COMPOSER2_TEST_MISSING}" }

[[steps]]
name = "one"
min_reward = { reward = 1.0, style = 0.5 }
[steps.agent]
timeout_sec = 60.0

[[steps]]
name = "two"
contributes_to_reward = false
[steps.verifier]
env = { STEP = "2" }
"""


# ------------------------------------------------------------------------------------------------------ task.toml


def test_task_toml_schema_defaults_and_unknown_keys(tmp_path, caplog):
    path = tmp_path / "task.toml"
    path.write_text(FULL_TOML)
    with caplog.at_level(logging.WARNING):
        c = parse_task_toml(path)
        parse_task_toml(path)  # warned once per key and process, not once per load
    warned = [r.getMessage() for r in caplog.records]
    assert sum("'frobnicate'" in m for m in warned) == 1 and sum("'environment.wobble'" in m for m in warned) == 1
    assert sum("'environment.mcp_servers'" in m and "not applied" in m for m in warned) == 1
    assert c.unknown_keys == ("frobnicate", "environment.wobble") and c.ignored_keys == ("environment.mcp_servers",)
    assert (c.difficulty, c.verifier_timeout_s, c.agent_timeout_s, c.build_timeout_s) == ("hard", 45.0, 1800.0, 1200.0)
    assert (c.cpus, c.memory_mb, c.storage_mb, c.workdir) == (2.0, 4096, 20480, "/srv")
    assert ((c.verifier_user, c.agent_user, c.healthcheck.retries, c.healthcheck.interval_sec)
            == ("tester", "1000", 5, 5.0))
    assert c.metadata["anything"] == {"nested": True} and c.package["name"] == "acme/full"
    assert c.network_policy.allow_hosts == ("pypi.org", "files.pythonhosted.org")
    assert c.network_policy.decide("GET", "pypi.org", 443)[0] and not c.network_policy.decide("GET", "x.org", 443)[0]
    assert [s.name for s in c.steps] == ["one", "two"] and c.multi_step_reward_strategy == "final"
    assert c.steps[0].min_reward == {"reward": 1.0, "style": 0.5} and c.steps[0].agent_timeout_s == 60.0
    assert c.steps[1].verifier_env == (("STEP", "2"),) and not c.steps[1].contributes_to_reward
    assert resolve_env(c.verifier_env, "v", {}) == {"TOKEN": "fallback", "PLAIN": "p"}
    assert resolve_env(c.verifier_env, "v", {"COMPOSER2_TEST_TOKEN": "t"})["TOKEN"] == "t"
    with pytest.raises(TaskError, match=re.escape("${COMPOSER2_TEST_MISSING} is not set")):
        resolve_env(c.solution_env, "[solution]", {})
    defaults = parse_task_toml(tmp_path / "missing.toml")  # Harbor's defaults
    assert (defaults.allow_internet, defaults.verifier_timeout_s, defaults.agent_timeout_s) == (True, 600.0, None)
    assert (defaults.memory_mb, defaults.storage_mb, defaults.network_policy.allow_hosts) == (2048, 10240, ("*",))
    path.write_text('multi_step_reward_strategy = "median"\n')
    with pytest.raises(TaskError, match="mean | final"):
        parse_task_toml(path)


def test_reward_files_scalar_rule_and_startup_failures():
    assert parse_rewards(b"1\n", None) == ({"reward": 1.0}, 1.0, None)
    js = json.dumps({"reward": 0.5, "style": 1, "ok": True, "note": "x"}).encode()
    assert parse_rewards(b"0", js) == ({"reward": 0.5, "style": 1.0}, 0.5, None)  # reward.json wins; bools, text drop
    assert parse_rewards(b"0.75", b'{"a": 1, "b": 0}') == ({"a": 1.0, "b": 0.0}, 0.75, None)  # reward.txt's fallback
    assert parse_rewards(None, b'{"score": 0.25}')[1] == 0.25  # the only key
    assert parse_rewards(None, b'{"a": 1, "b": 0, "c": 0.5}')[1] == 0.5  # the mean of the keys
    assert scalar_reward({"a": 1.0, "reward": 0.0}) == 0.0
    assert "no reward.txt or reward.json" in parse_rewards(None, None)[2]
    assert ("expected an object" in parse_rewards(None, b"[1]")[2]
            and "no numeric keys" in parse_rewards(None, b'{"a": "b"}')[2])
    assert "not finite" in parse_rewards(b"nan", None)[2] and "empty" in parse_rewards(b"  \n", None)[2]
    assert startup_failure("bash: line 3: uvx: command not found\n") == "bash: line 3: uvx: command not found"
    assert "No module named pytest" in startup_failure("/usr/bin/python3: No module named pytest\n")
    assert "No matching distribution" in startup_failure("ERROR: No matching distribution found for pytest==99\n")
    uv = ("error: Failed to download https://github.com/astral-sh/python-build-standalone/releases/download/2025/"
          "cpython-3.13.9.tar.gz\n  Caused by: HTTP status client error (404 ) for url (...)\n")
    assert startup_failure(uv).startswith("error: Failed to download")  # uvx -p 3.13 without a 3.13 to use
    assert startup_failure("FAILED test_x.py::test_a - assert 1 == 2\n1 failed, 3 passed in 0.1s\n") is None
    assert startup_failure("uvx: command not found\n...\nRan 4 tests in 0.01s\n\nFAILED (failures=1)\n") is None
    assert startup_failure("AssertionError: wrong total\n") is None
    assert min_reward_miss({"reward": 1.0, "style": 0.4}, {"reward": 1.0, "style": 0.5}) == \
        "style=0.4 is below min_reward 0.5"
    assert min_reward_miss({"style": 1.0}, 1.0) == "reward=-inf is below min_reward 1.0"
    assert min_reward_miss({"reward": 1.0}, 1.0) is None


def test_fixture_suite_loads_as_image_tasks():
    suite = load_suite(HARBOR)
    assert [t.name for t in suite.tasks] == ["apt-pytest", "http-service", "multi-reward", "multi-step"]
    assert all(t.is_image and t.repo_source is None for t in suite.tasks) and not suite.unsupported
    steps = suite.tasks[3].steps
    assert [s.config.name for s in steps] == ["create", "extend"] and steps[0].config.min_reward == 1.0
    assert steps[1].workdir_dir.name == "workdir" and steps[1].solution_dir.name == "solution"
    assert suite.tasks[3].instruction == ""  # a multi-step task's root instruction.md is optional
    with pytest.raises(KeyError, match="not in suite"):
        suite.select(["nope"])


# ------------------------------------------------------------------------------------------------------ running


@pytest.fixture(scope="module")
def bench_env():
    if PROBLEM is not None:
        if ON_CI:
            pytest.fail(f"CI=true but images cannot be built here: {PROBLEM}")
        pytest.skip(PROBLEM)
    e = Environment(config=SandboxConfig(image_pool_size=2), limits=SandboxLimits(timeout_s=60, max_timeout_s=5))
    yield e
    e.shutdown()


@pytest.fixture(scope="module")
def snapshots(bench_env):
    return SnapshotCache(bench_env)


def run(env, snapshots, root, agent, tmp_path=None):
    """Trials of every task under root, by name."""
    config = HarnessConfig(max_turns=12)
    trials = run_suite(env, load_suite(root), policies.make_agent(agent, config), workers=2, snapshots=snapshots,
                       options=TrialOptions(log_dir=tmp_path))
    return {t.task: t for t in trials}


@needs_images
def test_oracle_passes_and_null_fails_on_harbor_fixtures(bench_env, snapshots, tmp_path):
    oracle = run(bench_env, snapshots, HARBOR, "oracle", tmp_path / "logs")
    null = run(bench_env, snapshots, HARBOR, "null")
    for name in oracle:
        assert oracle[name].passed and oracle[name].error is None and oracle[name].grade_error is None, oracle[name]
        assert not null[name].passed and null[name].reward == 0.0 and null[name].grade_error is None, null[name]
    # the verifier started the service the oracle wrote (the one the oracle left running was killed before grading)
    assert oracle["http-service"].reward == 1.0 and null["http-service"].rewards == {"reward": 0.0}
    assert oracle["multi-reward"].rewards == {"reward": 1.0, "exists": 1.0, "lines": 1.0}  # every numeric key kept
    assert null["multi-reward"].rewards == {"reward": 0.0, "exists": 0.0, "lines": 0.0}
    steps = oracle["multi-step"].steps
    assert [(s["name"], s["reward"], s["passed"]) for s in steps] == [("create", 1.0, True), ("extend", 1.0, True)]
    stopped = null["multi-step"].steps  # step 1's min_reward = 1.0 ends the trial
    assert len(stopped) == 1 and stopped[0]["stopped"] == "reward=0.0 is below min_reward 1.0"
    t = oracle["apt-pytest"]
    assert t.image["mappings"][0].startswith("ubuntu:24.04 → Debian bookworm") and set(t.limits) == {
        "memory", "cpus", "storage"}
    assert "2 passed" in (tmp_path / "logs" / "apt-pytest.0.verifier.txt").read_text()
    assert (tmp_path / "logs" / "multi-step.0.extend.jsonl").exists()


def _image_task(root: Path, name: str, test_sh: str, solve: str | None = "echo ok > /app/done\n",
                toml_extra: str = "") -> Path:
    """An image task on the fixtures' base image (its build is a cache hit)."""
    path = root / name
    (path / "environment").mkdir(parents=True)
    shutil.copy(HARBOR / "http-service" / "environment" / "Dockerfile", path / "environment" / "Dockerfile")
    (path / "instruction.md").write_text("Make /app/done say ok.\n")
    (path / "task.toml").write_text("[verifier]\ntimeout_sec = 30.0\n[agent]\ntimeout_sec = 60.0\n"
                                    "[environment]\nmemory_mb = 1024\nstorage_mb = 1024\n" + toml_extra)
    (path / "tests").mkdir()
    (path / "tests" / "test.sh").write_text(test_sh)
    if solve is not None:
        (path / "solution").mkdir()
        (path / "solution" / "solve.sh").write_text(solve)
    return path


PASS_IF_DONE = ("#!/bin/bash\nif grep -q ok /app/done 2>/dev/null; then echo 1 > /logs/verifier/reward.txt; "
                "else echo 0 > /logs/verifier/reward.txt; fi\n")


@needs_images
def test_grading_errors_are_errors_not_zero_rewards(bench_env, snapshots, tmp_path):
    root = tmp_path / "suite"
    _image_task(root, "good", PASS_IF_DONE)
    _image_task(root, "no-solution", PASS_IF_DONE, solve=None)
    _image_task(root, "ruby-verifier", "#!/usr/bin/env ruby\nputs 1\n")
    _image_task(root, "uvx-verifier", "#!/bin/bash\nuvx pytest /tests/test_outputs.py\nif [ $? -eq 0 ]; then echo 1 "
                                      "> /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n")
    _image_task(root, "slow-verifier", "#!/bin/bash\nsleep 20\necho 1 > /logs/verifier/reward.txt\n",
                toml_extra="")
    (root / "slow-verifier" / "task.toml").write_text("[verifier]\ntimeout_sec = 2.0\n")
    _image_task(root, "long-verifier", "#!/bin/bash\nsleep 7\n" + PASS_IF_DONE.split("\n", 1)[1])
    broken = _image_task(root, "broken-build", PASS_IF_DONE)
    (broken / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nRUN echo building && exit 3\n")
    slow_build = _image_task(root, "slow-build", PASS_IF_DONE, toml_extra="build_timeout_sec = 3.0\n")
    (slow_build / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nRUN sleep 120\n")
    trials = run(bench_env, snapshots, root, "oracle")
    assert "ImageError" in trials["broken-build"].error and "exit code" in trials["broken-build"].error
    assert "ran past 3 s" in trials["slow-build"].error  # [environment] build_timeout_sec
    assert trials["good"].passed and trials["good"].error is None
    assert "no solution/solve.sh" in trials["no-solution"].error and trials["no-solution"].reward is None
    ruby = trials["ruby-verifier"]
    assert ruby.reward is None and not ruby.passed and "could not start (exit 127)" in ruby.grade_error
    uvx = trials["uvx-verifier"]
    assert uvx.reward is None and "test runner did not start" in uvx.grade_error and "uvx" in uvx.grade_error
    assert "ran past its 2 s timeout" in trials["slow-verifier"].grade_error
    # 30 s of verifier timeout is honoured although tool calls are capped at max_timeout_s = 5 s here
    assert trials["long-verifier"].passed, trials["long-verifier"].grade_error


@needs_images
def test_the_verifier_sees_the_agents_files_and_none_of_its_processes(bench_env, snapshots, tmp_path):
    from composer2_jax.bench.grade import grade

    task = load_task(HARBOR / "http-service")
    sid = bench_env.fork(snapshots.get(task))
    r = bench_env.exec(sid, "bash /dev/stdin <<'EOF'\n"
                       + (HARBOR / "http-service" / "solution" / "solve.sh").read_text() + "\nEOF", timeout_s=60)
    assert r["exit_code"] == 0
    assert grade(bench_env, sid, task).passed  # test.sh starts the server the agent wrote
    curl_only = tmp_path / "curl-only"  # a verifier that only asks the agent's own running service
    shutil.copytree(HARBOR / "http-service", curl_only)
    (curl_only / "tests" / "test.sh").write_text(
        "#!/bin/bash\nbody=$(curl -s --noproxy '*' --max-time 5 http://127.0.0.1:8080/health)\n"
        "if [ \"$body\" = ok ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n")
    bench_env.exec(sid, "nohup python3 /app/server.py > /dev/null 2>&1 & sleep 0.5", timeout_s=30)
    assert bench_env.exec(sid, "curl -s --noproxy '*' http://127.0.0.1:8080/health", timeout_s=30)["stdout"] == "ok"
    g = grade(bench_env, sid, load_task(curl_only))
    assert not g.passed and g.error is None  # the agent's server was killed before the verifier ran
    bench_env.close(sid)


@needs_images
@pytest.mark.parametrize("name", ["apt-pytest", "http-service"])
def test_agent_processes_cannot_forge_a_third_party_verdict(bench_env, snapshots, name):
    """Background, ptrace and mid-grading rewrite policies started in the agent's turn, against Harbor test.sh
    scripts we do not control, three times each: never a pass (the null agent scores 0 on both)."""
    from composer2_jax.bench.authoring import forgeries as forging
    from composer2_jax.bench.grade import grade

    task = load_task(HARBOR / name)
    for policy in forging.AGENT_PHASE:
        for _ in range(3):
            sid = bench_env.fork(snapshots.get(task))
            obs = bench_env.call(sid, "run_terminal_cmd", {"command": forging.agent_command(policy), "timeout": 5})
            assert "started" in obs.fields["stdout"], obs.content
            ps = bench_env.exec(sid, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '", timeout_s=30)["stdout"]
            assert "/tmp/.zz_agent.py" in ps, ps  # the policy's process outlived its command
            g = grade(bench_env, sid, task)
            assert g.reward == 0.0 and not g.passed, (policy, g.output[-500:])
            assert bench_env.exec(sid, "test -e /tmp/.zz_stolen_env && echo stolen", timeout_s=30)["stdout"] == ""
            bench_env.close(sid)


@needs_images
def test_a_verdict_on_tools_the_agent_replaced_is_marked(bench_env, snapshots):
    from composer2_jax.bench.grade import grade

    task = load_task(HARBOR / "apt-pytest")
    sid = bench_env.fork(snapshots.get(task))
    assert grade(bench_env, sid, task).agent_files_total == 0  # an untouched image: nothing of the agent's trusted
    bench_env.exec(sid, "cp /bin/true /usr/bin/cat && echo x > /etc/ld.so.preload.bak", timeout_s=30, user="")
    g = grade(bench_env, sid, task)
    assert "/usr/bin/cat" in g.agent_files and "/etc/ld.so.preload.bak" in g.agent_files and g.agent_files_total >= 2
    bench_env.close(sid)


def test_evaluate_cli_says_why_a_task_cannot_run(tmp_path, capsys):
    from experiments import evaluate

    root = tmp_path / "suite"
    (root / "musl" / "environment").mkdir(parents=True)
    (root / "musl" / "environment" / "Dockerfile").write_text("FROM alpine:3.20\n")
    (root / "musl" / "instruction.md").write_text("x\n")
    (root / "musl" / "tests").mkdir()
    (root / "musl" / "tests" / "test.sh").write_text("exit 0\n")
    assert evaluate.main(["--suite", str(root), "--tasks", "musl", "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "task musl is unsupported: alpine:3.20: Alpine (musl libc, apk)" in err and "no task of suite" in err
    assert evaluate.main(["--suite", str(root), "--tasks", "ghost", "--out", str(tmp_path / "out")]) == 2
    assert "['ghost'] are not in suite" in capsys.readouterr().err
    assert isinstance(load_task(root / "musl"), Unsupported) and not isinstance(load_task(root / "musl"), Task)
