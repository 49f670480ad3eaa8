"""The escape checks of tests/test_env_adversarial.py, a representative subset, against VM sandboxes (env/vm).

Each attack runs as root in a VM that has the (egress-only) network device, the most exposed configuration the VM
backend has; after it `contained` checks that the host canary is unchanged, a bystander VM still answers with its
own files, the attacker's VM is still the one QEMU process it was, and the shared disks on the host are unchanged.
All slow: every attacker is a VM resumed from a memory snapshot (QEMU with TCG here).
"""

import json

import pytest

from composer2_jax.env import EgressPolicy, Environment, SandboxConfig
from composer2_jax.env import testing as envtest
from composer2_jax.env.images import ImageBuilder
from composer2_jax.env.vm import assets
from tests import vm_escape
from tests.test_env_vm import HARBOR, ON_CI, PROBLEM
from tests.vm_escape import sh

pytestmark = pytest.mark.slow
canary = vm_escape.canary  # the module-scoped host canary fixture (tests/vm_escape.py)


@pytest.fixture(scope="module")
def env(upstream):
    if PROBLEM is not None:
        if ON_CI:
            pytest.fail(f"CI=true but VMs cannot run here: {PROBLEM}")
        pytest.skip(PROBLEM)
    builder = ImageBuilder()
    image = builder.build(HARBOR / "apt-pytest" / "environment")
    policy = EgressPolicy(allow_hosts=("127.0.0.1",), allow_ports=(upstream.port,), allow_private=True)
    e = Environment(config=SandboxConfig(backend="vm"), policy=policy)
    e.clean = e.snapshot(e.fork(e.import_image(image)))
    e.disks = vm_escape.disk_stamps(assets.image_disk(image), assets.runtime_disk())
    yield e
    e.shutdown()
    builder.close()


@pytest.fixture(scope="module")
def bystander(env):
    sid = env.fork(env.clean)
    assert env.call(sid, "write_file", {"path": "/app/mine.txt", "content": "bystander data"}).ok
    return sid


@pytest.fixture
def attacker(env):
    sid = env.fork(env.clean)
    yield sid
    env.close(sid)


def contained(env, attacker, bystander, canary):
    """The host canary, the shared disks, the bystander and the attacker's VM are as they should be."""
    vm_escape.contained(env, attacker, bystander, canary, "/app/mine.txt")


def _py(script: str) -> str:
    """A shell command running a Python script given as text."""
    return "python3 -c '%s'" % script.replace("'", "'\\''")


def test_vm_network_is_only_the_egress_proxy(env, attacker, bystander, canary, upstream):
    sink = envtest.UdpSink()
    seen = len(upstream.seen)
    code = (f"import socket\n"
            f"for host in ('127.0.0.1', '10.0.2.2', '10.0.2.100'):\n"
            f"    try:\n        socket.create_connection((host, {upstream.port}), timeout=3); print('tcp open')\n"
            f"    except OSError as e: print('tcp', type(e).__name__)\n"
            f"socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('10.0.2.2', {sink.port}))\n"
            f"try:\n    socket.getaddrinfo('example.com', 80); print('dns resolved')\n"
            f"except OSError as e: print('dns', type(e).__name__)\n")
    env.call(attacker, "write_file", {"path": "/tmp/net.py", "content": code})
    lines = sh(env, attacker, "python3 /tmp/net.py", timeout=40).fields["stdout"].split("\n")
    assert all(line.startswith("tcp ") and line != "tcp open" for line in lines[:3]), lines
    assert lines[3] == "dns gaierror"
    assert not sink.received() and len(upstream.seen) == seen
    fetch = "NO_PROXY= no_proxy= " + _py("import urllib.request as u; "
                                         "print(u.urlopen('http://%s:%d/vm', timeout=30).status)")
    assert sh(env, attacker, fetch % ("127.0.0.1", upstream.port)).fields["stdout"] == "200\n"
    assert len(upstream.seen) == seen + 1  # allowed by the policy: through the proxy, logged
    assert sh(env, attacker, fetch % ("blocked.invalid", upstream.port)).fields["exit_code"] != 0
    log = env.egress_log(attacker)
    assert [(e["host"], e["allowed"]) for e in log] == [("127.0.0.1", True), ("blocked.invalid", False)]
    sink.close()
    contained(env, attacker, bystander, canary)


def test_vm_host_files_and_processes_are_out_of_reach(env, attacker, bystander, canary):
    path, _ = canary
    obs = sh(env, attacker, f"cat {path} /proc/1/root{path}; kill -9 {env.info(bystander)['pid']}")
    assert obs.fields["exit_code"] != 0 and obs.fields["stdout"] == ""
    assert obs.fields["stderr"].count("No such file") == 2 and "No such process" in obs.fields["stderr"]
    assert "-cloud-amd64" in sh(env, attacker, "cat /proc/version").fields["stdout"]  # the guest's own kernel
    got = json.loads(sh(env, attacker, _py(envtest.CHROOT_ESCAPE)).fields["stdout"])
    assert got["chroot"] == "Operation not permitted"  # the agent's rule holds in the guest too
    contained(env, attacker, bystander, canary)


def test_vm_fork_bomb_and_memory_bomb_stay_in_the_guest(env, attacker, bystander, canary):
    bomb = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)\n"
    env.call(attacker, "write_file", {"path": "/tmp/bomb.py", "content": bomb})
    assert sh(env, attacker, "python3 /tmp/bomb.py", timeout=6).error == "timeout"
    contained(env, attacker, bystander, canary)
    assert sh(env, attacker, "echo recovered").fields["stdout"] == "recovered\n"
    obs = sh(env, attacker, "python3 -c 'x = []\nwhile True: x.append(bytearray(32 << 20))'", timeout=60)
    assert obs.fields["exit_code"] != 0  # MemoryError, or the guest's OOM killer: the guest's RAM is the bound
    contained(env, attacker, bystander, canary)
    assert sh(env, attacker, "echo recovered").fields["stdout"] == "recovered\n"


def test_vm_root_cannot_write_the_shared_disks(env, attacker, bystander, canary):
    obs = sh(env, attacker, "dd if=/dev/zero of=/dev/vda bs=4096 count=1 conv=fsync 2>&1; echo rc=$?")
    assert "rc=0" not in obs.fields["stdout"]  # the runtime disk is read-only at the device
    obs = sh(env, attacker, "dd if=/dev/zero of=/dev/vdb bs=1M count=8 conv=fsync 2>&1; echo rc=$?")
    assert "rc=0" in obs.fields["stdout"]  # its own disk: root may wreck it, but only its own overlay changes
    contained(env, attacker, bystander, canary)
