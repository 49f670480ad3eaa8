"""Workspace sandboxes (`create(repo)`) on the VM backend, and the escape checks of tests/test_env_adversarial.py
that apply to them (docs/env.md, "What each backend isolates", lists those that do not and why).

A VM workspace is a VM forked from one warm memory snapshot of the workspace image (booted once per module here)
with the repository copied to /workspace; commands and file tools run as uid 1000 with the per-command rlimits of a
bwrap workspace sandbox, and paths are confined to /workspace on both sides (host lexically, guest agent through
symlinks). After each attack `contained` checks that the host canary and the shared disks are unchanged, a
bystander VM still answers with its own files, the attacker's VM is the same live QEMU process, and no uid-1000
process of the attack is left in its guest. All slow: every sandbox is a VM (QEMU with TCG here).
"""

import json

import pytest

from composer2_jax.env import EgressPolicy, Environment, SandboxConfig, SandboxLimits
from composer2_jax.env import testing as envtest
from composer2_jax.env.vm import assets
from tests import vm_escape
from tests.test_env_vm import ON_CI, PROBLEM
from tests.vm_escape import sh

pytestmark = pytest.mark.slow
canary = vm_escape.canary  # the module-scoped host canary fixture (tests/vm_escape.py)
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
    e.disks = vm_escape.disk_stamps(assets.image_disk(e._ws_image), assets.runtime_disk())
    yield e
    e.shutdown()


@pytest.fixture(scope="module")
def bystander(env):
    sid = env.create(env.repo)
    assert env.call(sid, "write_file", {"path": "mine.txt", "content": "bystander data"}).ok
    return sid


@pytest.fixture
def attacker(env):
    sid = env.create(env.repo)
    yield sid
    env.close(sid)


def contained(env, attacker, bystander, canary):
    """Host canary, shared disks, bystander, the attacker's QEMU, and no uid-1000 process left in its guest."""
    vm_escape.contained(env, attacker, bystander, canary, "mine.txt")
    assert env.exec(attacker, UID_1000, timeout_s=60, user="")["stdout"].strip() == "0"


def _py(script: str) -> str:
    """A shell command running a Python script given as text."""
    return "python3 -c '%s'" % script.replace("'", "'\\''")


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


def test_vm_workspace_path_traversal_and_symlinks(env, attacker, bystander, canary):
    path, secret = canary
    for bad in ("../etc/passwd", "/etc/passwd", "/workspace/../etc/shadow", path, "/proc/1/root/etc", "\x00"):
        for tool, args in (("read_file", {"path": bad}), ("write_file", {"path": bad, "content": "pwned"}),
                           ("list_dir", {"path": bad}), ("run_terminal_cmd", {"command": "true", "cwd": bad})):
            assert env.call(attacker, tool, args).error == "path_outside_workspace", (tool, bad)
    sh(env, attacker, "ln -s /etc/passwd passwd; ln -s / root; ln -s .. up")
    for tool, args in (("read_file", {"path": "passwd"}), ("write_file", {"path": "root/tmp/x", "content": "x"}),
                       ("list_dir", {"path": "up"}), ("grep", {"pattern": "x", "path": "root"})):
        assert env.call(attacker, tool, args).error == "path_outside_workspace", (tool, args)  # the guest agent
    contained(env, attacker, bystander, canary)


def test_vm_workspace_host_files_and_the_agent_are_out_of_reach(env, attacker, bystander, canary):
    path, secret = canary
    obs = sh(env, attacker, f"cat {path} /proc/1/root{path}; ls /")
    assert secret not in obs.content and "workspace" in obs.fields["stdout"].split()
    for probe in ("cat /proc/1/mem", "ls /proc/1/fd", "cat /proc/1/environ", "kill -9 1", "touch /usr/x /etc/x",
                  "mount -t tmpfs t /tmp", "su -c id root </dev/null",
                  "python3 -c 'import ctypes, sys; sys.exit(ctypes.CDLL(None).ptrace(16, 1, 0, 0) != 0)'"):
        assert sh(env, attacker, probe).fields["exit_code"] != 0, probe  # uid 1000 cannot touch root's
    status = sh(env, attacker, "cat /proc/self/status").fields["stdout"]
    assert "NoNewPrivs:\t1" in status and "CapEff:\t0000000000000000" in status  # setuid binaries grant nothing
    got = json.loads(sh(env, attacker, _py(envtest.CHROOT_ESCAPE)).fields["stdout"])
    assert got["chroot"] == "Operation not permitted"  # no CAP_SYS_CHROOT for uid 1000
    assert sh(env, attacker, "echo still here").fields["stdout"] == "still here\n"
    contained(env, attacker, bystander, canary)


def test_vm_workspace_network_is_only_the_egress_proxy(env, attacker, bystander, canary, upstream):
    seen = len(upstream.seen)
    code = (f"import socket\n"
            f"try:\n    socket.create_connection(('127.0.0.1', {upstream.port}), timeout=2); print('tcp open')\n"
            f"except OSError as e: print('tcp', type(e).__name__)\n"
            f"try:\n    socket.getaddrinfo('example.com', 80); print('dns resolved')\n"
            f"except OSError as e: print('dns', type(e).__name__)\n")
    env.call(attacker, "write_file", {"path": "net.py", "content": code})
    lines = sh(env, attacker, "python3 net.py", timeout=20).fields["stdout"].split("\n")
    assert lines[:2] == ["tcp ConnectionRefusedError", "dns gaierror"]  # the guest's own loopback; no resolver
    assert len(upstream.seen) == seen
    obs = sh(env, attacker, "curl -sS -m 10 -o /dev/null -w '%{http_code}' http://blocked.invalid/", timeout=20)
    assert obs.fields["stdout"] == "403"
    log = env.egress_log(attacker)
    assert log and not any(e["allowed"] for e in log) and {e["host"] for e in log} == {"blocked.invalid"}
    contained(env, attacker, bystander, canary)


def test_vm_workspace_fork_bomb_and_memory_bomb(env, attacker, bystander, canary):
    bomb = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)\n"
    env.call(attacker, "write_file", {"path": "bomb.py", "content": bomb})
    assert sh(env, attacker, "python3 bomb.py", timeout=4).error == "timeout"  # RLIMIT_NPROC of uid 1000 holds it
    contained(env, attacker, bystander, canary)
    obs = sh(env, attacker, "python3 -c 'x = []\nwhile True: x.append(bytearray(32 << 20))'")
    assert obs.fields["exit_code"] != 0 and "MemoryError" in obs.fields["stderr"]
    contained(env, attacker, bystander, canary)


def test_vm_workspace_output_flood_and_endless_loop(env, attacker, bystander, canary):
    obs = sh(env, attacker, "head -c 1G /dev/zero | tr '\\0' a", timeout=60)
    assert obs.error == "too_large" and obs.fields["killed"] == "output_limit"
    assert 8 * MiB <= obs.fields["stdout_bytes"] < 1 << 30 and len(obs.content) < 3 * 4096
    obs = sh(env, attacker, "while :; do :; done", timeout=1)
    assert obs.error == "timeout" and obs.fields["wall_s"] < 4
    contained(env, attacker, bystander, canary)
