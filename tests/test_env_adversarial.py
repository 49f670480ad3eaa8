"""Adversarial sandboxes: every attempt is contained and leaves the host and other sandboxes as they were.

One set of escape checks for both backends: `env` is a workspace Environment on bubblewrap ("bwrap") or on VMs
("vm": workspace VMs forked from the warm workspace snapshot, uid 1000 in the guest, an egress-only NIC; slow under
TCG). A check that means something on one backend only is parametrized with `only(backend, why)`, and a part of a
check that only one backend has sits under `if is_vm(env)` / `if not is_vm(env)` with the reason beside it
(docs/env.md, "What each backend isolates"). After each attack `contained` checks, concretely: the host canary file
is unchanged, a bystander sandbox still answers with its own files intact, and no process of the attacker outlives
its command (bwrap: nothing but the guest in its pid namespace; vm: no uid-1000 process left in the guest, the same
live QEMU, the shared disks unchanged). All network targets are on 127.0.0.1 of this host; names the policy refuses
are refused before any lookup. At the end, VM-only checks: root in an image VM with the egress NIC.
"""

import json
import os
import secrets
import threading

import pytest

from composer2_jax.env import EgressPolicy, Environment, SandboxConfig, SandboxLimits
from composer2_jax.env import testing as envtest
from composer2_jax.env.images import ImageBuilder
from composer2_jax.env.vm import assets
from tests.test_env_vm import HARBOR, ON_CI, PROBLEM

pytestmark = pytest.mark.skipif(envtest.host_problem() is not None, reason=f"no sandboxes: {envtest.host_problem()}")
MiB = 1 << 20
VM = pytest.param("vm", marks=pytest.mark.slow, id="vm")  # every VM boots for real (TCG here): the slow step
# Counts the uid-1000 processes of a VM's guest (run as root, so the count never includes itself).
UID_1000 = "grep -l '^Uid:[[:space:]]*1000[[:space:]]' /proc/[0-9]*/status 2>/dev/null | wc -l"


def only(backend: str, why: str):
    """Run a check on one backend only; `why` (required, non-empty) says why it means nothing on the other."""
    assert backend in ("bwrap", "vm") and why.strip(), (backend, why)
    return pytest.mark.parametrize("env", ["bwrap" if backend == "bwrap" else VM], indirect=True)


def is_vm(env) -> bool:
    """True for the VM backend's Environment."""
    return env.rt.config.backend == "vm"


def _vms_or_skip() -> None:
    """Skip (fail under CI=true) where VMs cannot run."""
    if PROBLEM is not None:
        if ON_CI:
            pytest.fail(f"CI=true but VMs cannot run here: {PROBLEM}")
        pytest.skip(PROBLEM)


def disk_stamps(*paths: str) -> dict[str, tuple[int, int]]:
    """(mtime_ns, size) of the host disk files the VMs share, to compare after an attack."""
    return {path: (os.stat(path).st_mtime_ns, os.stat(path).st_size) for path in paths}


@pytest.fixture(scope="module", params=["bwrap", VM])
def env(request, upstream):
    policy = EgressPolicy(allow_hosts=("127.0.0.1",), allow_ports=(upstream.port,), allow_private=True)
    if request.param == "bwrap":
        limits = SandboxLimits(timeout_s=10, processes=64, memory_bytes=256 * MiB, disk_bytes=32 * MiB,
                               tmp_bytes=16 * MiB, output_bytes=4096, output_kill_bytes=8 * MiB,
                               sandbox_memory_bytes=512 * MiB)
        e = Environment(pool_size=2, limits=limits, policy=policy)
    else:
        _vms_or_skip()
        limits = SandboxLimits(timeout_s=10, processes=64, memory_bytes=256 * MiB, output_bytes=4096,
                               output_kill_bytes=8 * MiB)
        e = Environment(config=SandboxConfig(backend="vm"), limits=limits, policy=policy)
        e.close(e.create())  # builds the default workspace image (env/vm/workspace_image) and boots its snapshot
        e.disks = disk_stamps(assets.image_disk(e._ws_image), assets.runtime_disk())
    yield e
    e.shutdown()


@pytest.fixture(scope="module")
def canary(tmp_path_factory):
    """(path, secret): a host file no sandbox may read or change."""
    path = tmp_path_factory.mktemp("host") / "canary.txt"
    secret = secrets.token_hex(16)
    path.write_text(secret)
    return str(path), secret


@pytest.fixture(scope="module")
def bystander(env):
    sid = env.create()
    assert env.call(sid, "write_file", {"path": "mine.txt", "content": "bystander data"}).ok
    return sid


@pytest.fixture
def attacker(env):
    sid = env.create()
    yield sid
    env.close(sid)


def sh(env, sid, command, **kw):
    """run_terminal_cmd observation."""
    return env.call(sid, "run_terminal_cmd", {"command": command, **kw})


def contained(env, attacker, bystander, canary, bystander_file: str = "mine.txt"):
    """The host canary, the bystander and the attacker's process table are as they should be (VMs: also the
    shared disks, and the attacker's VM is the one live QEMU process it was)."""
    path, secret = canary
    with open(path) as f:
        assert f.read() == secret
    obs = sh(env, bystander, f"cat {bystander_file}")
    assert obs.ok and obs.fields["stdout"] == "bystander data"
    info = env.info(attacker)
    if not is_vm(env):
        assert envtest.pids_in_pidns(info["pidns"]) == [info["pid"]]  # only the guest is left
        return
    for disk, stamp in env.disks.items():
        assert (os.stat(disk).st_mtime_ns, os.stat(disk).st_size) == stamp, f"{disk} changed"
    assert info["alive"]
    if bystander_file == "mine.txt":  # a workspace VM: no process of the attack is left in its guest
        assert env.exec(attacker, UID_1000, timeout_s=60, user="")["stdout"].strip() == "0"


def test_path_traversal_and_absolute_paths(env, attacker, bystander, canary):
    path, secret = canary
    for bad in ("../etc/passwd", "/etc/passwd", "/workspace/../etc/shadow", "a/../../x", path, "/proc/self/cwd/x",
                "/proc/1/root" + path, "//etc/passwd", "/workspace/..", "\x00"):
        for tool, args in (("read_file", {"path": bad}), ("write_file", {"path": bad, "content": "pwned"}),
                           ("edit_file", {"path": bad, "old_string": secret, "new_string": "pwned"}),
                           ("list_dir", {"path": bad}), ("grep", {"pattern": secret, "path": bad}),
                           ("run_terminal_cmd", {"command": "true", "cwd": bad})):
            obs = env.call(attacker, tool, args)
            assert obs.error == "path_outside_workspace", (tool, bad, obs)
    contained(env, attacker, bystander, canary)


def test_symlinks_out_of_the_workspace(env, attacker, bystander, canary):
    path, secret = canary
    sh(env, attacker, f"ln -s /etc/passwd passwd; ln -s / root; ln -s {path} canary; "
                      "ln -s .. up; mkdir d; ln -s ../.. d/up2")
    for tool, args in (("read_file", {"path": "passwd"}), ("read_file", {"path": "canary"}),
                       ("write_file", {"path": "root/tmp/x", "content": "x"}),
                       ("write_file", {"path": "canary", "content": "x"}),
                       ("edit_file", {"path": "canary", "old_string": secret, "new_string": "x"}),
                       ("list_dir", {"path": "up"}), ("list_dir", {"path": "d/up2"}),
                       ("grep", {"pattern": "x", "path": "root"}),
                       ("run_terminal_cmd", {"command": "true", "cwd": "up"})):
        assert env.call(attacker, tool, args).error == "path_outside_workspace", (tool, args)
    obs = sh(env, attacker, "cat canary; echo pwned > canary; ls root/")
    assert secret not in obs.content and "work" not in obs.fields["stdout"].split()  # the host tree is not there
    kid = env.fork(attacker)  # the snapshot copies the links as links, never what they point to
    if not is_vm(env):  # bwrap: the frozen layer is a host dir (a VM's is a qcow2 layer of the guest's disk)
        frozen = env.rt.layers.path(env.info(attacker)["chain"][0])
        assert os.readlink(os.path.join(frozen, "canary")) == path and os.readlink(os.path.join(frozen, "root")) == "/"
    assert secret not in sh(env, kid, "cat canary 2>&1").content
    env.close(kid)
    contained(env, attacker, bystander, canary)


def test_host_files_through_proc(env, attacker, bystander, canary):
    path, secret = canary
    obs = sh(env, attacker, f"cat /proc/1/root{path} /proc/self/cwd/../..{path} /proc/self/root{path}; "
                            "ls /proc/1/root/ /proc/self/root/; ls /proc | grep -c '^[0-9]'")
    assert secret not in obs.content
    assert "work" not in obs.fields["stdout"].split() and "workspace" in obs.fields["stdout"].split()
    for probe in ("cat /proc/1/mem", "ls /proc/1/fd", "cat /proc/1/environ", "touch /usr/x /etc/x",
                  "mount -t tmpfs t /tmp", "su -c id root </dev/null",
                  "python3 -c 'import ctypes, sys; sys.exit(ctypes.CDLL(None).ptrace(16, 1, 0, 0) != 0)'"):
        assert sh(env, attacker, probe).fields["exit_code"] != 0, probe  # the guest cannot be traced or read
    status = sh(env, attacker, "cat /proc/self/status").fields["stdout"]
    assert "NoNewPrivs:\t1" in status and "CapEff:\t0000000000000000" in status  # setuid binaries grant nothing
    contained(env, attacker, bystander, canary)


def test_direct_tcp_udp_and_dns_egress(env, attacker, bystander, canary, upstream):
    sink = envtest.UdpSink()
    seen = len(upstream.seen)
    code = (f"import socket\n"
            f"try:\n    socket.create_connection(('127.0.0.1', {upstream.port}), timeout=2); print('tcp open')\n"
            f"except OSError as e: print('tcp', type(e).__name__)\n"
            f"socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {sink.port}))\n"
            f"try:\n    socket.getaddrinfo('example.com', 80); print('dns resolved')\n"
            f"except OSError as e: print('dns', type(e).__name__)\n"
            f"print(len(open('/proc/net/route').read().splitlines()))\n")
    env.call(attacker, "write_file", {"path": "net.py", "content": code})
    lines = sh(env, attacker, "python3 net.py", timeout=20).fields["stdout"].split("\n")
    assert lines[0] == "tcp ConnectionRefusedError"  # the sandbox's 127.0.0.1 is its own loopback
    assert lines[1] == "dns gaierror"  # no resolver reachable
    if not is_vm(env):  # bwrap: no interface but loopback (a VM's restricted NIC has a route; test_vm_* below)
        assert lines[2] == "1"  # only the route table header
    assert not sink.received() and len(upstream.seen) == seen
    sink.close()
    obs = sh(env, attacker, "curl -sS -m 10 -o /dev/null -w '%{http_code}' http://blocked.invalid/", timeout=20)
    assert obs.fields["stdout"] == "403"  # the only way out is the proxy, which refuses the host
    log = env.egress_log(attacker)
    assert log and not any(e["allowed"] for e in log) and {e["host"] for e in log} == {"blocked.invalid"}
    contained(env, attacker, bystander, canary)


def test_proxy_bypass_and_disallowed_hosts(env, attacker, bystander, canary, upstream):
    seen = len(upstream.seen)
    # bwrap: the proxy's own Unix socket, bound in; a VM has none: its way out is the guest process's relay port
    connect = (f"s = socket.socket(socket.AF_INET); s.connect(('127.0.0.1', {env.rt.config.proxy_port}))"
               if is_vm(env) else "s = socket.socket(socket.AF_UNIX); s.connect('/run/egress.sock')")
    code = (f"import socket, sys\n"
            f"for target in [b'http://127.0.0.1:{upstream.port}@blocked.invalid:{upstream.port}/', b'CONNECT',"
            f" b'http://blocked.invalid:{upstream.port}/']:\n"
            f"    {connect}\n"
            f"    line = b'CONNECT blocked.invalid:{upstream.port}' if target == b'CONNECT' else b'GET ' + target\n"
            f"    s.sendall(line + b' HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n')\n"
            f"    print(s.recv(200).split()[1].decode())\n")
    env.call(attacker, "write_file", {"path": "bypass.py", "content": code})
    assert sh(env, attacker, "python3 bypass.py").fields["stdout"].split() == ["403", "403", "403"]
    assert len(upstream.seen) == seen
    log = env.egress_log(attacker)
    assert len(log) == 3 and not any(e["allowed"] for e in log) and {e["host"] for e in log} == {"blocked.invalid"}
    contained(env, attacker, bystander, canary)


def test_fork_bomb(env, attacker, bystander, canary):
    pidns, peak, done = env.info(attacker)["pidns"], [0], threading.Event()

    def watch():  # bwrap: the sandbox's pid namespace is on this kernel (a VM's processes are the guest's)
        while not done.is_set() and pidns is not None:
            peak[0] = max(peak[0], len(envtest.pids_in_pidns(pidns)))

    bomb = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)\n"
    env.call(attacker, "write_file", {"path": "bomb.py", "content": bomb})  # every process keeps forking, forever
    watcher = threading.Thread(target=watch)
    watcher.start()
    obs = sh(env, attacker, "python3 bomb.py", timeout=4)  # never exits: it catches every failed fork
    done.set()
    watcher.join()
    assert obs.error == "timeout"
    if not is_vm(env):
        assert 32 < peak[0] <= 64  # it multiplied up to the sandbox's process limit and no further
    contained(env, attacker, bystander, canary)
    assert sh(env, attacker, "echo recovered").fields["stdout"] == "recovered\n"
    if is_vm(env):  # the shell's bomb below backgrounds its jobs, and a VM's background processes outlive a call
        return      # that exits (as in an image sandbox): the bwrap-only "background processes left behind" case
    # The shell's own bomb: dash gives up with "Cannot fork" once the limit bites, unless the command's
    # timeout comes first; which one wins is a race, and either way the sandbox must recover.
    obs = sh(env, attacker, "bomb() { bomb | bomb & }; bomb; wait", timeout=4)
    assert obs.error == "timeout" or "Cannot fork" in obs.fields["stderr"], obs
    contained(env, attacker, bystander, canary)
    assert sh(env, attacker, "echo recovered").fields["stdout"] == "recovered\n"


def test_memory_bomb(env, attacker, bystander, canary):
    obs = sh(env, attacker, "python3 -c 'x = []\nwhile True: x.append(bytearray(32 << 20))'")
    assert obs.fields["exit_code"] != 0 and "MemoryError" in obs.fields["stderr"]
    contained(env, attacker, bystander, canary)


@only("bwrap", "the bound is the workspace's disk_bytes tmpfs and tmp_bytes; a VM workspace has no quota in the "
               "guest (the root disk's free space bounds it) and filling 4 GiB under TCG costs minutes")
def test_filling_the_disk(env, attacker, bystander, canary):
    obs = sh(env, attacker, "cat /dev/zero > big; cat /dev/zero > /tmp/big; cat /dev/zero > /dev/shm/big;"
                            " cat /dev/zero > /big; cat /dev/zero > /usr/big; du -sm big | cut -f1")
    err = obs.fields["stderr"]
    assert err.count("No space left") == 3 and err.count("Read-only file system") == 2
    pid = env.info(attacker)["pid"]
    upper = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(f"/proc/{pid}/root/.sbx/upper") for f in fs)
    assert upper <= 32 * MiB
    assert sh(env, attacker, "rm big && echo ok > small && cat small").fields["stdout"] == "ok\n"
    contained(env, attacker, bystander, canary)


def test_infinite_loop(env, attacker, bystander, canary):
    obs = sh(env, attacker, "while :; do :; done", timeout=1)
    assert obs.error == "timeout" and obs.fields["wall_s"] < 4
    contained(env, attacker, bystander, canary)


def test_a_gigabyte_of_stdout(env, attacker, bystander, canary):
    obs = sh(env, attacker, "head -c 1G /dev/zero | tr '\\0' a", timeout=60)
    assert obs.error == "too_large" and obs.fields["killed"] == "output_limit"
    assert 8 * MiB <= obs.fields["stdout_bytes"] < 1 << 30 and len(obs.content) < 3 * 4096
    contained(env, attacker, bystander, canary)


def test_binary_output(env, attacker, bystander, canary):
    obs = sh(env, attacker, "head -c 3000 /dev/urandom; printf 'x\\000y\\033[31m' >&2")
    assert obs.ok and obs.fields["stdout"].startswith("[binary output") and obs.fields["stdout_binary"]
    assert "\x00" not in obs.fields["stderr"] and "\x1b" not in obs.fields["stderr"]
    assert json.loads(obs.to_json())["fields"]["stderr"] == obs.fields["stderr"]
    contained(env, attacker, bystander, canary)


def test_killing_the_parent(env, attacker, bystander, canary):
    pid = env.info(attacker)["pid"]
    sh(env, attacker, "kill -9 1; kill -TERM 1; kill -INT 1; kill -HUP 1; kill -9 $PPID; kill -9 -1")
    assert env.info(attacker)["pid"] == pid and env.info(attacker)["alive"]
    assert sh(env, attacker, "echo still here").fields["stdout"] == "still here\n"
    contained(env, attacker, bystander, canary)


@only("bwrap", "a VM sandbox's processes outlive their call (as in an image sandbox) and snapshots keep them")
def test_background_processes_left_behind(env, attacker, bystander, canary):
    daemon = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(1000)\n"
    env.call(attacker, "write_file", {"path": "daemon.py", "content": daemon})
    obs = sh(env, attacker, "sleep 1000 & setsid sleep 1001 & (nohup sleep 1002 >/dev/null 2>&1 &); "
                            "python3 daemon.py; echo back")
    assert obs.fields["stdout"] == "back\n" and obs.fields["wall_s"] < 5
    contained(env, attacker, bystander, canary)  # all four are gone once the command returns


def test_nested_namespaces_and_other_sandboxes_are_out_of_reach(env, attacker, bystander, canary):
    code = "import ctypes, sys; sys.exit(0 if ctypes.CDLL(None).unshare(0x10000000) == 0 else 1)"  # CLONE_NEWUSER
    if not is_vm(env):  # bwrap --disable-userns; a guest's nested user namespaces are the guest kernel's own
        assert sh(env, attacker, f'python3 -c "{code}"').fields["exit_code"] == 1
    other = env.info(bystander)["pid"]
    obs = sh(env, attacker, f"kill -9 {other}")  # the bystander's host pid means nothing in this pid namespace
    assert obs.fields["exit_code"] != 0 and "No such process" in obs.fields["stderr"]
    contained(env, attacker, bystander, canary)


def _py(script: str) -> str:
    """A shell command running a Python script given as text."""
    return "python3 -c '%s'" % script.replace("'", "'\\''")


def test_chroot_escape_and_nested_user_namespaces_are_refused(env, attacker, bystander, canary):
    obs = sh(env, attacker, _py(envtest.CHROOT_ESCAPE))
    got = json.loads(obs.fields["stdout"])
    assert got["chroot"] == "Operation not permitted"  # no CAP_SYS_CHROOT for the sandbox user
    if not is_vm(env):  # (a VM: nested user namespaces are the guest kernel's and confer nothing outside it)
        assert got["unshare_user"] != "ok"  # --disable-userns: no nested user namespace to regain it in
        assert sh(env, attacker, "unshare -U true").fields["exit_code"] != 0
    contained(env, attacker, bystander, canary)


@only("bwrap", "a VM has no host inode mounted in: its disks and serial port are devices")
def test_metadata_calls_leave_every_host_inode_mounted_in_unchanged(env, attacker, bystander, canary):
    host = [os.path.join(env.rt.egress_dir, f"{attacker}.sock"), env.rt.guest_dir, "/usr", "/etc",
            *[f"/dev/{n}" for n in ("null", "zero", "full", "random", "urandom", "tty")]]
    before = {p: envtest.inode_facts(p) for p in host}
    obs = sh(env, attacker, _py(envtest.METADATA_ATTACK))
    done = json.loads(obs.fields["stdout"])
    assert not [d for d in done if d.split()[1] in ("/run/egress.sock", "/dev/null", "/usr", "/etc")], done
    assert {p: envtest.inode_facts(p) for p in host} == before  # mode, owner and mtime of each host inode
    assert "403" in sh(env, attacker, "curl -sS -m 5 -o /dev/null -w '%{http_code}' http://example.com/").content
    contained(env, attacker, bystander, canary)


# ---------------------------------------------------------------------------------------------------------------
# VM-only: root in an image VM with the egress NIC, the most exposed configuration the VM backend has (a bwrap image
# sandbox's root is checked in tests/test_env_images.py). Every attacker is resumed from a memory snapshot.


@pytest.fixture(scope="module")
def image_vm(upstream):
    _vms_or_skip()
    builder = ImageBuilder()
    image = builder.build(HARBOR / "apt-pytest" / "environment")
    policy = EgressPolicy(allow_hosts=("127.0.0.1",), allow_ports=(upstream.port,), allow_private=True)
    e = Environment(config=SandboxConfig(backend="vm"), policy=policy)
    e.clean = e.snapshot(e.fork(e.import_image(image)))
    e.disks = disk_stamps(assets.image_disk(image), assets.runtime_disk())
    yield e
    e.shutdown()
    builder.close()


@pytest.fixture(scope="module")
def image_bystander(image_vm):
    sid = image_vm.fork(image_vm.clean)
    assert image_vm.call(sid, "write_file", {"path": "/app/mine.txt", "content": "bystander data"}).ok
    return sid


@pytest.fixture
def root_attacker(image_vm):
    sid = image_vm.fork(image_vm.clean)
    yield sid
    image_vm.close(sid)


@pytest.mark.slow
def test_vm_root_network_is_only_the_egress_proxy(image_vm, root_attacker, image_bystander, canary, upstream):
    env, attacker = image_vm, root_attacker
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
    assert all(line.startswith("tcp ") and line != "tcp open" for line in lines[:3]), lines  # host, gateway
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
    contained(env, attacker, image_bystander, canary, "/app/mine.txt")


@pytest.mark.slow
def test_vm_root_host_files_and_processes_are_out_of_reach(image_vm, root_attacker, image_bystander, canary):
    env, attacker = image_vm, root_attacker
    path, _ = canary
    obs = sh(env, attacker, f"cat {path} /proc/1/root{path}; kill -9 {env.info(image_bystander)['pid']}")
    assert obs.fields["exit_code"] != 0 and obs.fields["stdout"] == ""
    assert obs.fields["stderr"].count("No such file") == 2 and "No such process" in obs.fields["stderr"]
    assert "-cloud-amd64" in sh(env, attacker, "cat /proc/version").fields["stdout"]  # the guest's own kernel
    got = json.loads(sh(env, attacker, _py(envtest.CHROOT_ESCAPE)).fields["stdout"])
    assert got["chroot"] == "Operation not permitted"  # the bwrap guest's rule holds in the VM too
    contained(env, attacker, image_bystander, canary, "/app/mine.txt")


@pytest.mark.slow
def test_vm_root_fork_bomb_and_memory_bomb_stay_in_the_guest(image_vm, root_attacker, image_bystander, canary):
    env, attacker = image_vm, root_attacker
    # root is not bound by RLIMIT_NPROC: the guest process's cgroup (pids.max, env/vm/guest_init.py) is the bound
    count = ("import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
             "            time.sleep(120)\n            os._exit(0)\n        n += 1\n"
             "except OSError:\n    print(n, flush=True)\n    os.killpg(0, 9)\n")
    env.call(attacker, "write_file", {"path": "/tmp/count.py", "content": count})
    counted = sh(env, attacker, "python3 /tmp/count.py", timeout=120)
    forked = int(counted.fields["stdout"])
    assert 0 < forked <= env.limits.processes + 16, (forked, counted.content)
    assert sh(env, attacker, "echo recovered").fields["stdout"] == "recovered\n"
    bomb = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)\n"
    env.call(attacker, "write_file", {"path": "/tmp/bomb.py", "content": bomb})
    bombed = sh(env, attacker, "python3 /tmp/bomb.py", timeout=6)
    assert bombed.error == "timeout", bombed.content
    contained(env, attacker, image_bystander, canary, "/app/mine.txt")
    assert sh(env, attacker, "echo recovered").fields["stdout"] == "recovered\n"
    obs = sh(env, attacker, "python3 -c 'x = []\nwhile True: x.append(bytearray(32 << 20))'", timeout=60)
    assert obs.fields["exit_code"] != 0  # MemoryError, or the guest's OOM killer: the guest's RAM is the bound
    contained(env, attacker, image_bystander, canary, "/app/mine.txt")
    assert sh(env, attacker, "echo recovered").fields["stdout"] == "recovered\n"


@pytest.mark.slow
def test_vm_root_cannot_write_the_shared_disks(image_vm, root_attacker, image_bystander, canary):
    env, attacker = image_vm, root_attacker
    obs = sh(env, attacker, "dd if=/dev/zero of=/dev/vda bs=4096 count=1 conv=fsync 2>&1; echo rc=$?")
    assert "rc=0" not in obs.fields["stdout"]  # the runtime disk is read-only at the device
    obs = sh(env, attacker, "dd if=/dev/zero of=/dev/vdb bs=1M count=8 conv=fsync 2>&1; echo rc=$?")
    assert "rc=0" in obs.fields["stdout"]  # its own disk: root may wreck it, but only its own overlay changes
    contained(env, attacker, image_bystander, canary, "/app/mine.txt")
