"""Benchmark infrastructure: the Harbor-layout loader, pass@k, reports, grading isolation and the runner's policies."""

import itertools
import json
import math
import tarfile
from pathlib import Path

import pytest

from composer2_jax.bench import metrics, policies, report
from composer2_jax.bench.engine_policy import EnginePolicy
from composer2_jax.bench.runner import SnapshotCache, TrialOptions, run_suite
from composer2_jax.bench.task import Suite, Task, TaskError, Unsupported, load_suite, load_task
from composer2_jax.data import tokenizer as tk
from composer2_jax.env.harness import HarnessConfig
from tests.markers import needs_sandbox

TEST_SH = """#!/usr/bin/env bash
mkdir -p "$LOGS_DIR/verifier"
if python3 -c "import app; assert app.answer() == 42"; then echo 1 > "$LOGS_DIR/verifier/reward.txt"; \
else echo 0 > "$LOGS_DIR/verifier/reward.txt"; fi
"""
HARBOR_TOML = """version = "1.0"

[metadata]
author_name = "Someone"
difficulty = "medium"
category = "programming"
tags = ["python", "toy"]

[verifier]
timeout_sec = 30.0

[agent]
timeout_sec = 200.0

[environment]
build_timeout_sec = 600.0
cpus = 2
memory = "2G"
storage_mb = 4096
"""


def write_task(root: Path, name: str, files: dict[str, str]) -> Path:
    """A task folder from relative path -> text."""
    for rel, text in files.items():
        path = root / name / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / name


def toy_task(root: Path, name: str = "toy", test_sh: str = TEST_SH, **extra: str) -> Path:
    """A Harbor-layout task: app.answer() must return 42; the repo returns 41; solve.sh fixes it."""
    return write_task(root, name, {
        "instruction.md": "Make app.answer() return 42.\n", "task.toml": HARBOR_TOML,
        "environment/repo/app.py": "def answer():\n    return 41\n", "tests/test.sh": test_sh,
        "solution/solve.sh": "sed -i 's/41/42/' app.py\n", **extra})


# ------------------------------------------------------------------------------------------------------ loader


def test_loader_reads_a_harbor_folder(tmp_path):
    task = load_task(toy_task(tmp_path))
    assert isinstance(task, Task) and task.name == "toy"
    c = task.config
    assert (c.difficulty, c.category, c.tags) == ("medium", "programming", ("python", "toy"))
    assert (c.verifier_timeout_s, c.agent_timeout_s, c.cpus) == (30.0, 200.0, 2.0)
    assert (c.memory_mb, c.storage_mb) == (2048, 4096)
    assert c.metadata["author_name"] == "Someone" and c.allow_internet  # Harbor's default: internet allowed
    assert c.network_policy.allow_hosts == ("*",)
    no_net = load_task(toy_task(tmp_path, "offline", **{"task.toml": HARBOR_TOML + "allow_internet = false\n"}))
    assert no_net.config.network_policy.allow_hosts == ()  # deny all
    assert task.instruction.startswith("Make app.answer()") and task.solution_dir is not None
    assert task.repo_dir() == tmp_path / "toy" / "environment" / "repo"


def test_tasks_this_runner_cannot_run_are_reported_unsupported(tmp_path):
    def task(name, files):
        return write_task(tmp_path, name, {"instruction.md": "Do it.\n", "task.toml": HARBOR_TOML,
                                           "tests/test.sh": "exit 0\n", **files})

    task("alpine", {"environment/Dockerfile": "FROM alpine:3.20\nRUN apk add python3\n"})
    task("compose", {"environment/Dockerfile": "FROM ubuntu:24.04\n",
                     "environment/docker-compose.yaml": "services:\n  main:\n    ports: ['80:80']\n"})
    task("gpu", {"environment/Dockerfile": "FROM ubuntu:24.04\n", "task.toml": "[environment]\ngpus = 1\n"})
    task("stage", {"environment/Dockerfile": "FROM golang:1.22 AS build\nFROM ubuntu:24.04\nCOPY --from=build /x /x\n"})
    task("image", {"task.toml": '[environment]\ndocker_image = "ghcr.io/x/y:1"\n'})
    task("ubuntu", {"environment/Dockerfile": "FROM ubuntu:24.04\n"})
    toy_task(tmp_path)
    suite = load_suite(tmp_path)
    assert [t.name for t in suite.tasks] == ["toy", "ubuntu"] and suite.tasks[1].is_image
    reasons = {u.name: u.reason for u in suite.unsupported}
    assert "Alpine (musl libc, apk)" in reasons["alpine"]
    assert "services.main.ports: the key 'ports' is not supported" in reasons["compose"]
    assert "1 GPU(s)" in reasons["gpu"]
    assert "golang:1.22: no local stand-in" in reasons["stage"] and "ghcr.io/x/y:1" in reasons["image"]


def test_malformed_tasks_raise_clear_errors(tmp_path):
    with pytest.raises(TaskError, match="no instruction.md"):
        load_task(write_task(tmp_path, "a", {"task.toml": ""}))
    bad = toy_task(tmp_path, "b", **{"task.toml": '[metadata]\ndifficulty = "brutal"\n'})
    with pytest.raises(TaskError, match="'brutal'; expected one of"):
        load_task(bad)
    with pytest.raises(TaskError, match="not valid TOML"):
        load_task(toy_task(tmp_path, "c", **{"task.toml": "[metadata\n"}))
    with pytest.raises(TaskError, match="timeout_sec = -1"):
        load_task(toy_task(tmp_path, "d", **{"task.toml": "[agent]\ntimeout_sec = -1\n"}))
    with pytest.raises(TaskError, match="no environment; expected environment/Dockerfile"):
        load_task(write_task(tmp_path, "e", {"instruction.md": "x", "tests/test.sh": ""}))
    with pytest.raises(TaskError, match="memory_mb = 'lots'"):
        load_task(toy_task(tmp_path, "f", **{"task.toml": '[environment]\nmemory = "lots"\n'}))
    with pytest.raises(FileNotFoundError, match="neither a folder nor one of"):
        load_suite("no-such-suite")


def test_archive_repo_and_generator_materialise_once(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "app.py").write_text("def answer():\n    return 41\n")
    root = toy_task(tmp_path, "arch")
    for p in (root / "environment" / "repo").iterdir():
        p.unlink()
    (root / "environment" / "repo").rmdir()
    with tarfile.open(root / "environment" / "repo.tar.gz", "w:gz") as tf:
        tf.add(src / "app.py", arcname="app.py")
    (root / "environment" / "generate.py").write_text(
        "import os, sys\nfor i in range(3):\n    open(os.path.join(sys.argv[1], f'log{i}.txt'), 'w').write(str(i))\n")
    task = load_task(root)
    first = task.repo_dir(tmp_path / "cache")
    assert sorted(p.name for p in first.iterdir()) == ["app.py", "log0.txt", "log1.txt", "log2.txt"]
    assert task.repo_dir(tmp_path / "cache") == first



def test_a_generator_past_its_bound_is_a_clear_error_and_leaves_no_cache(tmp_path, monkeypatch):
    from composer2_jax.bench import task as task_mod

    root = toy_task(tmp_path, "slowgen")
    (root / "environment" / "generate.py").write_text("import time\ntime.sleep(30)\n")
    monkeypatch.setattr(task_mod, "GENERATOR_TIMEOUT_S", 1)
    with pytest.raises(TaskError, match="ran past GENERATOR_TIMEOUT_S = 1 s"):
        load_task(root).repo_dir(tmp_path / "cache")
    assert not any((tmp_path / "cache").iterdir())  # the staging copy is gone, nothing half-built is cached

def test_egress_policy_from_task_toml(tmp_path):
    toml = HARBOR_TOML.replace("storage_mb = 4096\n", "storage_mb = 4096\nallow_internet = true\n\n"
                                                      '[environment.egress]\nallow_hosts = ["pypi.org"]\n')
    policy = load_task(toy_task(tmp_path, **{"task.toml": toml})).config.network_policy
    assert policy.allow_hosts == ("pypi.org",) and policy.decide("GET", "pypi.org", 443)[0]


# ------------------------------------------------------------------------------------------------------ metrics


def brute_pass_at_k(n, c, k):
    """Fraction of k-subsets of n samples (c correct) holding at least one correct one."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


def test_pass_at_k_matches_enumeration_and_the_closed_form():
    for n in range(1, 8):
        for c in range(n + 1):
            for k in range(1, n + 1):
                got = metrics.pass_at_k(n, c, k)
                assert math.isclose(got, brute_pass_at_k(n, c, k), abs_tol=1e-12)
                assert math.isclose(got, 1 - math.comb(n - c, k) / math.comb(n, k), abs_tol=1e-12)
    assert metrics.pass_at_k(10, 3, 1) == pytest.approx(0.3)
    with pytest.raises(ValueError, match="k=4 must be in 1..n=3"):
        metrics.pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="n=2, c=3"):
        metrics.pass_at_k(2, 3, 1)


def synthetic_trials():
    """4 samples each of three tasks in two categories."""
    rows = []
    for task, cat, diff, passes in (("a", "bug", "easy", [1, 1, 0, 0]), ("b", "bug", "hard", [0, 0, 0, 0]),
                                    ("c", "logs", "hard", [1, 1, 1, 1])):
        rows += [{"task": task, "category": cat, "difficulty": diff, "sample": i, "passed": bool(p), "reward": p,
                  "turns": 3, "tool_calls": 5, "malformed": 0, "generated_tokens": 100 * (i + 1), "wall_s": 1.0}
                 for i, p in enumerate(passes)]
    return rows


def test_aggregate_per_task_category_and_difficulty():
    agg = metrics.aggregate(synthetic_trials(), ks=[1, 2, 4])
    assert agg["tasks"]["a"]["pass@1"] == 0.5 and agg["tasks"]["a"]["pass@2"] == pytest.approx(1 - 1 / 6)
    assert agg["tasks"]["b"]["pass@4"] == 0 and agg["tasks"]["c"]["pass@4"] == 1
    assert agg["categories"]["bug"]["pass@1"] == 0.25 and agg["categories"]["bug"]["tasks"] == 2
    assert agg["difficulties"]["hard"]["pass@1"] == 0.5
    assert agg["overall"]["pass@1"] == pytest.approx(0.5) and agg["tasks"]["a"]["mean_generated_tokens"] == 250


def test_crashed_trials_are_errors_not_failures():
    trials = synthetic_trials()
    for t in trials:
        if t["task"] == "c" or (t["task"] == "a" and t["sample"] == 3):  # every trial of c and one of a crashed
            t.update(passed=False, reward=None, error=f"ValueError: token ids [374] are outside vocab #{t['sample']}")
    record = report.build_record(Suite("v9", Path("."), (), ()), "model:x", trials, ks=[1])
    a, c = record["tasks"]["a"], record["tasks"]["c"]
    assert (a["n"], a["c"], a["errors"], a["pass@1"]) == (3, 2, 1, pytest.approx(2 / 3))
    assert (c["n"], c["errors"], c["pass@1"]) == (0, 4, None) and c["first_error"].endswith("#0")
    assert record["overall"]["errors"] == 5 and record["overall"]["pass@1"] == pytest.approx((2 / 3 + 0) / 2)
    md = report.markdown(record)
    assert "**5 trial(s) of 2 task(s) ended in an error**" in md
    assert "- `c` (4 errored): ValueError: token ids [374] are outside vocab #0" in md
    assert "| logs | 1 | 4 | – |" in md  # an all-errored category shows no pass rate, not 0 %


def test_report_files_and_index_keyed_by_suite_version(tmp_path):
    suite = Suite("v9", tmp_path, (), (Unsupported("dock", tmp_path, "needs Docker"),))
    record = report.build_record(suite, "null", synthetic_trials(), ks=[1, 4])
    paths = report.write_run(tmp_path / "out", tmp_path / "out" / "v9" / "null" / "run1", record)
    assert json.loads(paths["json"].read_text())["suite_version"] == "v9"
    md = paths["markdown"].read_text()
    assert "| bug | 2 | 0 | 25.0 | 50.0 |" in md and "`dock`: needs Docker" in md
    assert paths["plot"].stat().st_size > 1000
    index = json.loads((tmp_path / "out" / "index.json").read_text())
    assert index["v9"]["null"]["overall"]["pass@4"] == pytest.approx(2 / 3)
    assert index["v9"]["null"]["run_dir"] == "v9/null/run1"


def test_agent_specs(tmp_path):
    with pytest.raises(ValueError, match="expected one of oracle, null, broken, tamper or model:CHECKPOINT"):
        policies.make_agent("human")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        policies.make_agent(f"model:{tmp_path}/none")
    assert policies.describe("model:runs/x/ckpt") == "model-runs_x_ckpt"
    assert policies.fit_context(HarnessConfig(max_new_tokens=1000, summary_tokens=500), 4096).context_budget == 2584
    assert policies.fit_context(HarnessConfig(max_new_tokens=100), 1 << 20).context_budget == 32_768
    with pytest.raises(ValueError, match="max_new_tokens=5000 / summary_tokens=2048 do not fit the model's context"):
        policies.fit_context(HarnessConfig(max_new_tokens=5000), 4096)


def _toy_engine(max_len: int = 64, chunk: int = 16, page_size: int = 8, vocab_size: int = 272):
    from composer2_jax.infer.rollout_engine import EngineConfig, RolloutEngine
    from composer2_jax.infer.testing import random_variables
    from composer2_jax.model_config import get_model_config

    cfg = get_model_config("toy", num_layers=1, num_mtp_layers=0, vocab_size=vocab_size, max_position_embeddings=6144)
    variables = random_variables(cfg, seed=0)
    ecfg = EngineConfig(slots=2, chunk=chunk, prefill_rows=1, page_size=page_size,
                        num_pages=max(64, 2 * max_len // page_size), max_len=max_len)
    return RolloutEngine(cfg, variables["params"], variables.get("router_state", {}), ecfg)


def test_engine_policy_serves_concurrent_episodes_one_session_per_thread():
    import threading

    engine = _toy_engine()
    policy = EnginePolicy(engine, stop_id=264, policy_version=3)
    out = [None] * 4
    threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, policy.generate([1 + i] * (5 + i), 10)))
               for i in range(4)]  # 4 episodes on 2 decode slots
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(o is not None and 1 <= len(o.ids) <= 10 and o.policy_version == 3 for o in out)
    assert all(len(o.logprobs) == len(o.ids) and all(p <= 0 for p in o.logprobs) for o in out)
    assert len(engine.sessions) == 4  # one per episode thread
    first = policy.generate([7] * 20, 4)  # this thread's session: the common prefix is reused on the next call
    computed = engine.report()["computed"]
    policy.generate([7] * 20 + list(first.ids) + [9, 9], 4)
    assert engine.report()["computed"] - computed <= 1 + 2 + 3  # last reply token + 2 new, then ≤ 3 decode feeds
    assert len(policy.generate([1] * 60, 100).ids) <= 4  # clamped to the engine's 64-token context
    with pytest.raises(ValueError, match="leaves no room in the engine's context of 64"):
        policy.generate([1] * 64, 5)


def test_engine_policy_with_a_real_model_through_the_harness():
    from composer2_jax.env.harness import run_episode
    from tests.test_harness import FakeEnv

    # a vocabulary padded well beyond the tokenizer's: a random policy over all 512 ids would emit undecodable ids
    engine = _toy_engine(max_len=6144, chunk=512, page_size=64, vocab_size=512)  # ~5k tokens of tool schemas
    tok = tk.ByteTokenizer()
    policy = EnginePolicy(engine, tok.special_id(tk.IM_END), policy_version=5, vocab_limit=tok.vocab_size)
    config = policies.fit_context(HarnessConfig(max_turns=1, max_new_tokens=12, summary_tokens=8), policy.max_context)
    r = run_episode(FakeEnv(), "sbx", "Say hi.", policy, tok, config)
    assert r.turns == 1 and 1 <= r.generated_tokens <= 12
    trained = [t for t in r.episode.turns if t.trainable]
    assert sum(len(t.tokens) for t in trained) == r.generated_tokens
    assert all(i < tok.vocab_size for t in trained for i in t.tokens)  # only the tokenizer's ids are sampled
    assert all(t.policy_version == 5 and all(p < 0 for p in t.logprobs) for t in trained)


# ------------------------------------------------------------------------------------------------------ grading


@pytest.fixture(scope="module")
def env():
    from composer2_jax.env import Environment, SandboxLimits

    e = Environment(pool_size=2, limits=SandboxLimits(timeout_s=30))
    yield e
    e.shutdown()


def run(env, root, agent, config=HarnessConfig(max_turns=12), snapshots=None, log_dir=None):
    suite = load_suite(root) if not isinstance(root, Suite) else root
    return run_suite(env, suite, policies.make_agent(agent, config), workers=2, snapshots=snapshots,
                     options=TrialOptions(log_dir=log_dir))


@needs_sandbox
def test_oracle_null_broken_on_a_harbor_task(env, tmp_path):
    toy_task(tmp_path / "suite")
    snaps = SnapshotCache(env)
    (oracle,) = run(env, tmp_path / "suite", "oracle", snapshots=snaps)
    (null,) = run(env, tmp_path / "suite", "null", snapshots=snaps)
    (broken,) = run(env, tmp_path / "suite", "broken", snapshots=snaps, log_dir=tmp_path / "logs")
    assert (oracle.passed, oracle.reward, oracle.stop_reason) == (True, 1.0, "submitted")
    assert (null.passed, null.reward) == (False, 0.0)
    assert (broken.passed, broken.reward, broken.stop_reason) == (False, 0.0, "no_tool_call")
    assert broken.malformed == 7 and broken.error is None
    assert "7 malformed tool call(s)" in broken.notes and "unknown_tool" in broken.notes
    log = Path(broken.log).read_text()
    assert "malformed tool call (invalid_json)" in log and "unterminated" in log


@needs_sandbox
def test_tampering_with_tests_or_reward_cannot_change_the_grade(env, tmp_path):
    toy_task(tmp_path / "suite", **{"environment/repo/tests/test.sh": "echo visible tests\n"})
    (trial,) = run(env, tmp_path / "suite", "tamper", log_dir=tmp_path / "logs")
    assert trial.stop_reason == "submitted" and trial.malformed == 0
    assert (trial.passed, trial.reward) == (False, 0.0)
    log = Path(trial.log).read_text()
    assert "reward.txt" in log and '"ok": true' in log  # the tampering itself succeeded inside its sandbox


@needs_sandbox
def test_reward_symlink_planted_by_tested_code_is_not_followed(env, tmp_path):
    evil = '#!/usr/bin/env bash\nmkdir -p "$LOGS_DIR/verifier"\nln -s /etc/hostname "$LOGS_DIR/verifier/reward.txt"\n'
    root = toy_task(tmp_path / "suite", test_sh=evil)
    from composer2_jax.bench.grade import grade

    task = load_task(root)
    g = grade(env, env.import_repo(task.repo_dir()), task)
    assert (g.reward, g.passed, g.reward_source) == (0.0, False, "host")
    assert "not a regular file" in g.error or "refused" in g.error


@needs_sandbox
def test_verifier_timeout_and_missing_reward(env, tmp_path):
    from composer2_jax.bench.grade import grade

    slow = toy_task(tmp_path, "slow", test_sh="sleep 30\n",
                    **{"task.toml": HARBOR_TOML.replace("timeout_sec = 30.0", "timeout_sec = 1.0", 1)})
    task = load_task(slow)
    g = grade(env, env.import_repo(task.repo_dir()), task)
    assert g.timed_out and g.reward == 0.0 and "1 s timeout" in g.error
    silent = load_task(toy_task(tmp_path, "silent", test_sh="echo no reward here\n"))
    g = grade(env, env.import_repo(silent.repo_dir()), silent)
    assert not g.passed and "no reward.txt" in g.error and "no reward here" in g.output


@needs_sandbox
def test_evaluate_cli_writes_record_report_and_plot(tmp_path):
    from experiments import evaluate

    out = tmp_path / "eval"
    rc = evaluate.main(["--suite", "v0", "--agent", "oracle", "--tasks", "bug-config-equals,feature-kv-ttl",
                        "--workers", "2", "--out", str(out)])
    assert rc == 0
    (run_dir,) = (out / "v0" / "oracle").iterdir()
    record = json.loads((run_dir / "results.json").read_text())
    assert record["overall"]["pass@1"] == 1.0 and set(record["tasks"]) == {"bug-config-equals", "feature-kv-ttl"}
    assert (run_dir / "pass_at_k.png").exists() and "| bug | 1 | 0 | 100.0 |" in (run_dir / "report.md").read_text()
    assert json.loads((out / "index.json").read_text())["v0"]["oracle"]["overall"]["pass@1"] == 1.0
    assert len(list((run_dir / "logs").glob("*.jsonl"))) == 2


# ------------------------------------------------------------------------------------------------------ generator


def test_generator_rewrites_imports_and_deletes_whole_functions():
    from composer2_jax.bench.authoring import generate_stdlib as gen

    src = "import os\nimport textwrap\nfrom textwrap import dedent, fill\nimport textwrap as tw\nx = textwrap.fill\n"
    out = gen.rewrite_imports(src, "textwrap")
    assert out == ("import os\nfrom vendored import textwrap\nfrom vendored.textwrap import dedent, fill\n"
                   "from vendored import textwrap as tw\nx = textwrap.fill\n")
    assert gen.rewrite_imports("m = import_helper.import_fresh_module('heapq')\n", "heapq") is None
    module = "a = 1\n\n@deco\ndef f(x):\n    '''Doc.'''\n    return x\n\n\ndef g():\n    '''G.'''\n    return f(1)\n"
    (cand,) = [c for c in gen.candidates("m", *_write_pair(module)) if c.function == "f"]
    assert (cand.start, cand.end, cand.signature, cand.docstring) == (3, 6, "f(x)", "Doc.")
    assert gen.delete_function(module, cand) == "a = 1\n\n\n\ndef g():\n    '''G.'''\n    return f(1)\n"


def _write_pair(module_source):
    """A module file and a test file that mentions f and g, in a fresh temp dir."""
    import tempfile

    d = Path(tempfile.mkdtemp())
    (d / "m.py").write_text(module_source)
    (d / "test_m.py").write_text("import unittest\nclass FTest(unittest.TestCase):\n    def test(self):\n"
                                 "        m.f(1)\n        m.g()\n")
    return d / "m.py", d / "test_m.py"


@needs_sandbox
def test_generated_task_oracle_passes_and_null_fails(env, tmp_path):
    from composer2_jax.bench.authoring import generate_stdlib as gen

    if gen.find_sources("fnmatch", gen.stdlib_dirs()) is None:
        pytest.skip("no Lib/test/test_fnmatch.py on this machine")
    (path,) = gen.generate(tmp_path / "suite", count=1, modules=("fnmatch",))
    assert path.name.startswith("gen1-fnmatch-")
    task = load_task(path)
    assert task.category == "feature-deletion" and task.config.metadata["generator_version"] == 1
    assert "def " in task.instruction and "fnmatch" in task.instruction
    snaps = SnapshotCache(env)
    (oracle,) = run(env, tmp_path / "suite", "oracle", snapshots=snaps)
    (null,) = run(env, tmp_path / "suite", "null", snapshots=snaps)
    assert (oracle.passed, null.passed) == (True, False), (oracle.grade_error, null.grade_error)
