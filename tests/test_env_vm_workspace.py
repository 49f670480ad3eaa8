"""Workspace sandboxes (`create(repo)`) on the VM backend: the repository as uid 1000, processes kept by snapshots.

A VM workspace is a VM forked from one warm memory snapshot of the workspace image (booted once per module here)
with the repository copied to /workspace; commands and file tools run as uid 1000 with the per-command rlimits of a
bwrap workspace sandbox, and paths are confined to /workspace on both sides (host lexically, guest process through
symlinks). The escape checks run against VM workspaces in tests/test_env_adversarial.py (its `env` fixture is
parametrized over both backends). Slow: every sandbox is a VM (QEMU with TCG here).
"""

import pytest

from composer2_jax.env import EgressPolicy, Environment, SandboxConfig, SandboxLimits
from tests.test_env_vm import ON_CI, PROBLEM

pytestmark = pytest.mark.slow
MiB = 1 << 20
CODE_PORT = 8790
# Counts the uid-1000 processes of the guest (run as root, so the count never includes itself).
UID_1000 = "grep -l '^Uid:[[:space:]]*1000[[:space:]]' /proc/[0-9]*/status 2>/dev/null | wc -l"


@pytest.fixture(scope="module")
def env(upstream, tmp_path_factory):
    if PROBLEM is not None:
        if ON_CI:
            pytest.fail(f"CI=true but VMs cannot run here: {PROBLEM}")
        pytest.skip(PROBLEM)
    limits = SandboxLimits(timeout_s=10, processes=64, memory_bytes=256 * MiB, output_bytes=4096,
                           output_kill_bytes=8 * MiB)
    policy = EgressPolicy(allow_hosts=("127.0.0.1",), allow_ports=(upstream.port,), allow_private=True)
    e = Environment(config=SandboxConfig(backend="vm"), limits=limits, policy=policy)
    e.close(e.create())  # builds the default workspace image (env/vm/workspace_image) and boots its warm snapshot
    repo = tmp_path_factory.mktemp("repo")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "README.md").write_text("toy repo\n")
    e.repo = str(repo)
    yield e
    e.shutdown()


def sh(env, sid, command, **kw):
    """run_terminal_cmd observation."""
    return env.call(sid, "run_terminal_cmd", {"command": command, **kw})


def test_vm_workspace_holds_the_repo_as_uid_1000_and_snapshots_its_processes(env):
    sid = env.create(env.repo)
    assert env.call(sid, "read_file", {"path": "pkg/calc.py"}).ok
    obs = sh(env, sid, "id -u; id -g; pwd; stat -c %u pkg/calc.py; python3 -c 'from pkg.calc import add; "
                       "print(add(2, 3))'")
    assert obs.fields["stdout"].split() == ["1000", "1000", "/workspace", "1000", "5"], obs
    assert sh(env, sid, f"(nohup python3 -m http.server {CODE_PORT} >/dev/null 2>&1 &); sleep 3; echo up").ok
    get = f"python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{CODE_PORT}/README.md').read())\""
    assert "toy repo" in sh(env, sid, get).fields["stdout"]
    assert env.exec(sid, UID_1000, timeout_s=60, user="")["stdout"].strip() == "1"  # the server (the probe sees it)
    snap = env.snapshot(sid)
    assert sh(env, sid, "rm -rf pkg README.md && pkill -f http.server; ls | wc -l").fields["stdout"] == "0\n"
    kid = env.fork(snap)
    assert "toy repo" in sh(env, kid, get).fields["stdout"]  # the server is there without a restart
    env.restore(sid, snap)
    assert "toy repo" in sh(env, sid, get).fields["stdout"] and env.call(sid, "read_file", {"path": "pkg/calc.py"}).ok
    assert env.call(kid, "write_file", {"path": "only-kid.txt", "content": "x"}).ok
    assert env.call(sid, "read_file", {"path": "only-kid.txt"}).error == "not_found"  # forks diverge
    env.close(kid)
    env.close(sid)
