"""Published verifier shapes run unchanged: the verifier phase reaches the package registries and the mirror map,
whatever [environment] allow_internet gives the agent.

The tasks here have `allow_internet = false` and test.sh scripts as Terminal-Bench 2 publishes them:
- `apt-get update && apt-get install -y curl`, `curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh`,
  `source $HOME/.local/bin/env`, `uvx -p 3.13 -w pytest==8.4.1 pytest /tests/test_outputs.py -rA` on python:3.13-slim
  (Debian trixie's python3 3.13), and the same with `-p 3.11` on python:3.11-slim (bookworm's 3.11): uv uses the
  image's interpreter; it would download a missing one from GitHub, which is not a registry;
- `pip install pytest==8.4.1 && pytest /tests/test_outputs.py`.
The astral.sh installer and uv's release tarball are answered by the egress proxy's mirror (uv from its PyPI wheel);
apt, pip and uv reach the registries this host's apt and pip are configured for. This is the only network these
tests use (the image build and the registries); the first run builds python:3.11-slim's stand-in (about a minute on a
machine that has the Debian base cached).
"""

import shutil
from pathlib import Path

import pytest

from composer2_jax.bench import policies
from composer2_jax.bench.runner import SnapshotCache, TrialOptions, run_suite
from composer2_jax.bench.task import load_suite
from composer2_jax.env import EgressPolicy, Environment, SandboxConfig, SandboxLimits
from composer2_jax.env.harness import HarnessConfig
from composer2_jax.env.images import ImageBuilder
from composer2_jax.env.sandbox_config import Resources
from composer2_jax.verify import network as verifier_net
from tests.test_env_images import ON_CI, PROBLEM, needs_images

DOCKERFILE = "FROM python:3.11-slim\nWORKDIR /app\n"
DOCKERFILE_313 = "FROM python:3.13-slim\nWORKDIR /app\n"
TEST_OUTPUTS = "from pathlib import Path\n\n\ndef test_done():\n    assert Path('/app/done').read_text() == 'ok\\n'\n"
REWARD = ("if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n")
UV_SHAPE = ("#!/bin/bash\n"
            "apt-get update\n"
            "apt-get install -y curl\n"
            "curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh\n"
            "source $HOME/.local/bin/env\n"
            "uvx -p 3.11 -w pytest==8.4.1 pytest /tests/test_outputs.py -rA\n" + REWARD)
PIP_SHAPE = "#!/bin/bash\npip install pytest==8.4.1\npytest /tests/test_outputs.py -rA\n" + REWARD
# the oracle also tries the network: allow_internet = false must deny it in the agent's phase
SOLVE = ("python3 -c \"import urllib.request as u; u.urlopen('https://pypi.org/simple/', timeout=10)\" "
         ">/dev/null 2>&1 && echo 'network reached' >&2\necho ok > /app/done\n")


@pytest.fixture(scope="module")
def bench_env():
    if PROBLEM is not None:
        if ON_CI:
            pytest.fail(f"CI=true but images cannot be built here: {PROBLEM}")
        pytest.skip(PROBLEM)
    e = Environment(config=SandboxConfig(image_pool_size=1), limits=SandboxLimits(timeout_s=120, max_timeout_s=60))
    yield e
    e.shutdown()


def _task(root: Path, name: str, test_sh: str, dockerfile: str = DOCKERFILE) -> Path:
    path = root / name
    (path / "environment").mkdir(parents=True)
    (path / "environment" / "Dockerfile").write_text(dockerfile)
    (path / "instruction.md").write_text("Make /app/done say ok.\n")
    (path / "task.toml").write_text("[verifier]\ntimeout_sec = 600.0\n[agent]\ntimeout_sec = 120.0\n"
                                    "[environment]\nallow_internet = false\nmemory_mb = 2048\nstorage_mb = 4096\n")
    (path / "tests").mkdir()
    (path / "tests" / "test.sh").write_text(test_sh)
    (path / "tests" / "test_outputs.py").write_text(TEST_OUTPUTS)
    (path / "solution").mkdir()
    (path / "solution" / "solve.sh").write_text(SOLVE)
    return path


@needs_images
def test_published_verifier_shapes_pass_for_the_oracle_with_no_agent_internet(bench_env, tmp_path):
    root = tmp_path / "suite"
    _task(root, "uv-shape", UV_SHAPE)
    _task(root, "uv-shape-313", UV_SHAPE.replace("-p 3.11", "-p 3.13"), DOCKERFILE_313)
    _task(root, "pip-shape", PIP_SHAPE)
    config = HarnessConfig(max_turns=4)
    trials = {t.task: t for t in run_suite(bench_env, load_suite(root), policies.make_agent("oracle", config),
                                           workers=1, snapshots=SnapshotCache(bench_env),
                                           options=TrialOptions(log_dir=tmp_path / "logs"))}
    for name, t in trials.items():
        out = (tmp_path / "logs" / f"{name}.0.verifier.txt").read_text()
        assert t.passed and t.error is None and t.grade_error is None, (t, out[-3000:])
        assert "1 passed" in out and "pytest-8.4.1" in out, out[-3000:]
        agent = t.egress["agent"]  # the agent's phase: allow_internet = false, every request denied and logged
        assert agent and all(not e["allowed"] for e in agent), agent
        assert any(e["host"] == "pypi.org" and e["method"] == "CONNECT" for e in agent)
        verifier = t.egress["verifier"]
        assert all(e["allowed"] for e in verifier), [e["summary"] for e in verifier if not e["allowed"]]
        assert any(e["host"] == "pypi.org" and e["method"] == "CONNECT" and e["status"] == 200 for e in verifier)
        assert any(e["host"] == "files.pythonhosted.org" for e in verifier)
    uv = [e["summary"] for e in trials["uv-shape"].egress["verifier"]]
    assert "ALLOWED GET https://astral.sh/uv/0.9.5/install.sh -> 200 (mirrored from builtin uv-installer 0.9.5)" in uv
    assert ("ALLOWED GET https://github.com/astral-sh/uv/releases/download/0.9.5/uv-x86_64-unknown-linux-gnu.tar.gz "
            "-> 200 (mirrored from pypi uv==0.9.5 (manylinux_2_17_x86_64) scripts)") in uv
    assert any(s.startswith("ALLOWED GET http://") and "/pool/main/c/curl/curl_" in s for s in uv)  # apt, over http
    uv_out = (tmp_path / "logs" / "uv-shape.0.verifier.txt").read_text()
    assert "everything's installed!" in uv_out and "Python 3.11" in uv_out
    assert "Python 3.13" in (tmp_path / "logs" / "uv-shape-313.0.verifier.txt").read_text()


@needs_images
def test_the_verifier_network_leaves_no_trace_for_the_next_agent(bench_env, tmp_path):
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(DOCKERFILE)
    image = ImageBuilder().build(ctx)
    sid = bench_env.fork(bench_env.import_image(image, workdir="/app"), policy=EgressPolicy(),
                         resources=Resources(memory_bytes=1 << 30, storage_bytes=1 << 30))
    bundle = verifier_net.BUNDLES[0]
    before = bench_env.exec(sid, f"sha256sum {bundle}", user="")["stdout"]
    net = verifier_net.enter(bench_env, sid)
    check = (f"test -f {verifier_net.TRUST_FILE} && test -f {verifier_net.APT_FILE} && grep -c '{verifier_net.MARK}' "
             f"{bundle} && cat {verifier_net.APT_FILE} && test -s {net.dir}/ca.pem")
    r = bench_env.exec(sid, check, user="")
    assert r["exit_code"] == 0 and r["stdout"].startswith("2\n") and 'Acquire::http::Proxy "http://127.0.0.1:' in \
        r["stdout"], r
    # the mirror CA is trusted by the image's own clients in this phase (python's default store here)
    fetch = ("python3 -c \"import urllib.request as u; print(u.urlopen('https://astral.sh/uv/install.sh', "
             "timeout=20).read()[:9].decode())\"")
    assert bench_env.exec(sid, fetch, env=net.env)["stdout"].strip() == "#!/bin/sh"
    verifier_net.leave(bench_env, sid, net)
    after = bench_env.exec(sid, f"sha256sum {bundle}; ls {verifier_net.TRUST_FILE} {verifier_net.APT_FILE} {net.dir} "
                                "2>&1 | grep -c 'No such file'", user="")["stdout"]
    assert after == before + "3\n", (before, after)
    denied = bench_env.exec(sid, fetch + " 2>&1 | tail -1")["stdout"]
    assert "403" in denied or "Tunnel connection failed" in denied, denied
    phases = [(e["phase"], e["allowed"]) for e in bench_env.egress_log(sid)]
    assert phases == [("verifier", True), ("verifier", True), ("agent", False)], bench_env.egress_log(sid)
    bench_env.close(sid)
    shutil.rmtree(ctx)


def test_agent_phase_follows_allow_internet_and_the_runs_allow_list(tmp_path):
    from types import SimpleNamespace

    from composer2_jax.bench.runner import agent_phase_egress
    from composer2_jax.bench.task_config import parse_task_toml

    def policy(toml, run=None):
        (tmp_path / "task.toml").write_text(toml)
        return agent_phase_egress(SimpleNamespace(config=parse_task_toml(tmp_path / "task.toml")), run)

    run = EgressPolicy(allow_hosts=("pypi.org", "*.pythonhosted.org"))
    assert policy("[environment]\nallow_internet = false\n", run).allow_hosts == ()  # nothing
    assert policy("[environment]\nallow_internet = true\n", run) == run  # the run's allow list
    assert policy("[environment]\nallow_internet = true\n").allow_hosts == ("*",)  # no run list: any host
    assert policy('[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["a.example"]\n', run).allow_hosts == (
        "a.example",)
    assert policy('[environment.egress]\nallow_hosts = ["b.example"]\n', run).allow_hosts == ("b.example",)


@needs_images
def test_multi_step_phases_are_logged_per_step_and_the_mirror_ca_is_gone_for_the_next_agent(bench_env, tmp_path):
    root = tmp_path / "suite"
    path = root / "steps"
    (path / "environment").mkdir(parents=True)
    (path / "environment" / "Dockerfile").write_text(DOCKERFILE)
    (path / "task.toml").write_text('[verifier]\ntimeout_sec = 120.0\n[agent]\ntimeout_sec = 60.0\n[environment]\n'
                                    'allow_internet = false\nmemory_mb = 1024\nstorage_mb = 2048\n'
                                    '[[steps]]\nname = "one"\n[[steps]]\nname = "two"\n')
    # the verifier fetches a mirrored https URL (trusting the mirror CA) and reaches PyPI; the next step's agent
    # finds the mirror CA gone from the trust store and its requests denied
    verify = ("#!/bin/bash\npython3 - <<'EOF'\nimport urllib.request as u\nCHECK\n"
              "assert u.urlopen('https://astral.sh/uv/install.sh', timeout=30).read().startswith(b'#!/bin/sh')\n"
              "assert u.urlopen('https://pypi.org/simple/pytest/', timeout=30).status == 200\nEOF\n" + REWARD)
    solve_two = ("grep -c composer2-verifier-mirror-ca /etc/ssl/certs/ca-certificates.crt > /app/marks || true\n"
                 + SOLVE)
    marks = "assert open('/app/marks').read() == '0\\n', open('/app/marks').read()"  # step two's agent saw none
    for name, solve, check in (("one", SOLVE, ""), ("two", solve_two, marks)):
        step = path / "steps" / name
        (step / "tests").mkdir(parents=True)
        (step / "solution").mkdir()
        (step / "instruction.md").write_text("Make /app/done say ok.\n")
        (step / "tests" / "test.sh").write_text(verify.replace("CHECK", check))
        (step / "solution" / "solve.sh").write_text(solve)
    config = HarnessConfig(max_turns=4)
    (t,) = run_suite(bench_env, load_suite(root), policies.make_agent("oracle", config), workers=1,
                     snapshots=SnapshotCache(bench_env))
    assert t.passed and [s["passed"] for s in t.steps] == [True, True], t
    assert set(t.egress) == {"agent:one", "verifier:one", "agent:two", "verifier:two"}, t.egress.keys()
    for name in ("one", "two"):
        assert [e["allowed"] for e in t.egress[f"agent:{name}"]] == [False]  # solve.sh's PyPI request, denied
        hosts = [(e["method"], e["host"], e["allowed"]) for e in t.egress[f"verifier:{name}"]]
        assert ("GET", "astral.sh", True) in hosts and ("CONNECT", "pypi.org", True) in hosts, hosts
