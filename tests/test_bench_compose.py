"""Multi-container tasks (environment/docker-compose.yaml, bench/compose.py): the supported subset parses, every
unsupported key fails naming itself and the file, and a two-service task runs for real: the main service reaches the
other by name on the task's private network, the oracle scores 1 and the null agent 0, and a snapshot covers every
service's files. Images: the fixtures' base (tests/test_env_images.py), a cache hit.
"""

import shutil
import textwrap
from pathlib import Path

import pytest

from composer2_jax.bench import compose, policies
from composer2_jax.bench.compose import ComposeError, parse_compose
from composer2_jax.bench.runner import SnapshotCache, run_suite
from composer2_jax.bench.task import Task, Unsupported, load_suite, load_task
from composer2_jax.env import Environment, SandboxConfig, SandboxLimits
from composer2_jax.env.harness import HarnessConfig
from tests.test_env_images import ON_CI, PROBLEM, needs_images

HARBOR = Path(__file__).parent / "data" / "harbor"

# a key-value store on port 80 that keeps its values in files (so a snapshot of its service keeps them)
STORE = textwrap.dedent("""\
    import os
    from http.server import BaseHTTPRequestHandler, HTTPServer
    os.makedirs("/srv/kv", exist_ok=True)
    class KV(BaseHTTPRequestHandler):
        def _send(self, code, body):
            self.send_response(code); self.send_header("Content-Length", str(len(body))); self.end_headers()
            self.wfile.write(body)
        def do_GET(self):
            if self.path == "/health":
                return self._send(200, b"ok")
            p = "/srv/kv/" + self.path.rsplit("/", 1)[-1]
            self._send(200, open(p, "rb").read()) if os.path.exists(p) else self._send(404, b"")
        def do_PUT(self):
            data = self.rfile.read(int(self.headers["Content-Length"]))
            open("/srv/kv/" + self.path.rsplit("/", 1)[-1], "wb").write(data)
            self._send(201, b"")
    HTTPServer(("0.0.0.0", 80), KV).serve_forever()
""")

COMPOSE = {
    "services": {
        "main": {"build": {"context": "img"}, "environment": {"STORE_URL": "http://${STORE_HOST:-store}"},
                 "depends_on": {"store": {"condition": "service_healthy"}}},
        "store": {"build": "img", "command": ["python3", "-c", STORE], "container_name": "kv-store",
                  "healthcheck": {"test": ["CMD", "curl", "-sf", "http://localhost/health"], "interval": "200ms",
                                  "timeout": "5s", "retries": 50}},
    },
}
TEST_SH = ("#!/bin/bash\nbody=$(curl -s --max-time 5 \"$STORE_URL/kv/name\")\n"
           "if [ \"$body\" = composer ]; then echo 1 > /logs/verifier/reward.txt; "
           "else echo \"got: $body\"; echo 0 > /logs/verifier/reward.txt; fi\n")
SOLVE_SH = "#!/bin/bash\ncurl -sf -X PUT --data composer http://kv-store/kv/name\n"


def compose_task(root: Path, name: str = "kv", spec: dict | None = None) -> Path:
    """A two-service task: `store` (a key-value server with a healthcheck) and `main`, the agent's."""
    import yaml

    path = root / name
    (path / "environment" / "img").mkdir(parents=True)
    shutil.copy(HARBOR / "http-service" / "environment" / "Dockerfile", path / "environment" / "img" / "Dockerfile")
    (path / "environment" / "docker-compose.yaml").write_text(yaml.safe_dump(spec or COMPOSE))
    (path / "instruction.md").write_text("Store the value 'composer' under the key 'name' in the key-value service "
                                         "(PUT $STORE_URL/kv/<key>).\n")
    (path / "task.toml").write_text("[verifier]\ntimeout_sec = 60.0\n[agent]\ntimeout_sec = 60.0\n"
                                    "[environment]\nmemory_mb = 1024\nstorage_mb = 1024\n")
    (path / "tests").mkdir()
    (path / "tests" / "test.sh").write_text(TEST_SH)
    (path / "solution").mkdir()
    (path / "solution" / "solve.sh").write_text(SOLVE_SH)
    return path


# ------------------------------------------------------------------------------------------------------ parsing


def test_compose_subset_parses_in_start_order(tmp_path):
    task = load_task(compose_task(tmp_path))
    assert isinstance(task, Task) and task.is_image and task.image_context is None
    spec = task.compose
    assert [s.name for s in spec.services] == ["store", "main"] and spec.main == "main"
    store, main = spec.service("store"), spec.service("main")
    assert store.command[:2] == ("python3", "-c") and store.aliases == ("kv-store",)
    assert store.healthcheck.command == "curl -sf http://localhost/health"
    assert (store.healthcheck.interval_sec, store.healthcheck.retries) == (0.2, 50)
    assert main.depends_on == (("store", "service_healthy"),) and main.command is None
    assert dict(main.environment) == {"STORE_URL": "http://store"}  # ${VAR:-default}
    assert spec.names() == ("store", "kv-store", "main")
    assert compose.parse_duration("1m30s", "x", tmp_path) == 90.0


def test_a_compose_file_without_main_gets_harbors_main_service(tmp_path):
    env = tmp_path / "environment"
    env.mkdir()
    (env / "Dockerfile").write_text("FROM ubuntu:24.04\n")
    (env / "docker-compose.yaml").write_text("services:\n  db:\n    image: python:3.12-slim\n"
                                             "    command: sleep infinity\n")
    spec = parse_compose(env / "docker-compose.yaml")
    assert spec.main == "main" and spec.service("main").context == env
    assert spec.service("db").image == "python:3.12-slim" and spec.service("db").command == ("sleep", "infinity")


UNSUPPORTED = [
    ({"networks": {"default": {}}}, "networks"),
    ({"volumes": {"data": {}}}, "volumes"),
    ({"services": {"store": {"ports": ["80:80"]}}}, "ports"),
    ({"services": {"store": {"volumes": ["./x:/x"]}}}, "volumes"),
    ({"services": {"store": {"privileged": True}}}, "privileged"),
    ({"services": {"store": {"network_mode": "host"}}}, "network_mode"),
    ({"services": {"store": {"build": {"context": "img", "target": "dev"}}}}, "target"),
    ({"services": {"store": {"healthcheck": {"test": "true", "frequency": "1s"}}}}, "frequency"),
    ({"services": {"main": {"depends_on": {"store": {"condition": "service_healthy", "restart": True}}}}},
     "restart"),
]


def _merged(extra: dict) -> dict:
    spec = {"services": {k: dict(v) for k, v in COMPOSE["services"].items()}}
    for key, value in extra.items():
        if key != "services":
            spec[key] = value
            continue
        for name, fields in value.items():
            spec["services"][name].update(fields)
    return spec


@pytest.mark.parametrize("extra,key", UNSUPPORTED, ids=[k for _, k in UNSUPPORTED])
def test_each_unsupported_key_fails_naming_the_key_and_the_file(tmp_path, extra, key):
    path = compose_task(tmp_path, spec=_merged(extra))
    with pytest.raises(ComposeError, match=rf"docker-compose.yaml: .*{key}: the key '{key}' is not supported"):
        parse_compose(path / "environment" / "docker-compose.yaml")
    loaded = load_task(path)
    assert isinstance(loaded, Unsupported) and f"'{key}' is not supported" in loaded.reason
    assert str(path / "environment" / "docker-compose.yaml") in loaded.reason


def test_unsupported_values_fail_naming_the_value(tmp_path):
    bad = _merged({"services": {"main": {"depends_on": {"store": {"condition": "service_completed_successfully"}}}}})
    with pytest.raises(ComposeError, match="condition = 'service_completed_successfully' is not supported"):
        parse_compose(compose_task(tmp_path, "a", bad) / "environment" / "docker-compose.yaml")
    cyc = _merged({"services": {"store": {"depends_on": ["main"]}}})
    with pytest.raises(ComposeError, match="depends_on cycle"):
        parse_compose(compose_task(tmp_path, "b", cyc) / "environment" / "docker-compose.yaml")
    dur = _merged({"services": {"store": {"healthcheck": {"test": "true", "interval": "soon"}}}})
    with pytest.raises(ComposeError, match="interval = 'soon'; expected a duration"):
        parse_compose(compose_task(tmp_path, "c", dur) / "environment" / "docker-compose.yaml")


# ------------------------------------------------------------------------------------------------------ running


@pytest.fixture(scope="module")
def compose_env():
    if PROBLEM is not None:
        if ON_CI:
            pytest.fail(f"CI=true but images cannot be built here: {PROBLEM}")
        pytest.skip(PROBLEM)
    e = Environment(config=SandboxConfig(image_pool_size=0), limits=SandboxLimits(timeout_s=60, max_timeout_s=5))
    yield e
    e.shutdown()


@needs_images
def test_two_service_task_oracle_passes_null_fails(compose_env, tmp_path):
    compose_task(tmp_path / "suite")
    suite, snapshots, config = load_suite(tmp_path / "suite"), SnapshotCache(compose_env), HarnessConfig(max_turns=4)
    trials = {}
    for agent in ("oracle", "null"):
        [trials[agent]] = run_suite(compose_env, suite, policies.make_agent(agent, config), workers=1,
                                    snapshots=snapshots)
    oracle, null = trials["oracle"], trials["null"]
    assert oracle.passed and oracle.reward == 1.0 and oracle.error is None and oracle.grade_error is None, oracle
    assert not null.passed and null.reward == 0.0 and null.error is None and null.grade_error is None, null
    assert compose_env.sandboxes() == []  # every service's sandbox closed with the trial


@needs_images
def test_services_share_a_private_network_and_snapshots_cover_every_service(compose_env, tmp_path):
    task = load_task(compose_task(tmp_path))
    snap = SnapshotCache(compose_env).get(task)
    group = compose.fork_compose(compose_env, snap)
    try:
        put = compose_env.exec(group.main, SOLVE_SH.split("\n", 1)[1] + "echo; cat /etc/hosts", timeout_s=30)
        assert put["exit_code"] == 0 and "kv-store" in put["stdout"], put
        # no other network: the host's loopback services and the internet are unreachable from the services
        out = compose_env.exec(group.sids["store"], "curl -s --noproxy '*' --max-time 3 http://example.com; "
                               "echo code=$?", timeout_s=30)["stdout"]
        assert "code=0" not in out, out
        frozen = group.snapshot()
    finally:
        group.close()
    again = compose.fork_compose(compose_env, frozen)
    try:
        got = compose_env.exec(again.main, 'curl -s "$STORE_URL/kv/name"', timeout_s=30)
        assert got["stdout"] == "composer", got  # the store service's files came with the snapshot
        fresh = compose.fork_compose(compose_env, snap)
        try:
            assert compose_env.exec(fresh.main, 'curl -s -o /dev/null -w "%{http_code}" "$STORE_URL/kv/name"',
                                    timeout_s=30)["stdout"] == "404"  # and the task's own snapshot is untouched
        finally:
            fresh.close()
    finally:
        again.close()
