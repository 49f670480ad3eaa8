"""Adversarial sandboxes: every attempt is contained and leaves the host and other sandboxes as they were.

After each attack `contained` checks, concretely: the host canary file is unchanged, a bystander sandbox
still answers with its own files intact, and no process of the attacker outlives its command. All
network targets are on 127.0.0.1 of this host; names the policy refuses are refused before any lookup.
"""

import json
import os
import secrets
import threading

import pytest

from composer2_jax.env import EgressPolicy, Environment, SandboxLimits
from composer2_jax.env import testing as envtest

pytestmark = pytest.mark.skipif(envtest.host_problem() is not None, reason=f"no sandboxes: {envtest.host_problem()}")
MiB = 1 << 20


@pytest.fixture(scope="module")
def env(upstream):
    limits = SandboxLimits(timeout_s=10, processes=64, memory_bytes=256 * MiB, disk_bytes=32 * MiB, tmp_bytes=16 * MiB,
                           output_bytes=4096, output_kill_bytes=8 * MiB, sandbox_memory_bytes=512 * MiB)
    policy = EgressPolicy(allow_hosts=("127.0.0.1",), allow_ports=(upstream.port,), allow_private=True)
    e = Environment(pool_size=2, limits=limits, policy=policy)
    yield e
    e.shutdown()


@pytest.fixture(scope="module")
def canary(tmp_path_factory):
    path = tmp_path_factory.mktemp("host") / "canary.txt"
    secret = secrets.token_hex(16)
    path.write_text(secret)
    return str(path), secret


@pytest.fixture(scope="module")
def bystander(env):
    sid = env.create()
    env.call(sid, "write_file", {"path": "mine.txt", "content": "bystander data"})
    return sid


@pytest.fixture
def attacker(env):
    sid = env.create()
    yield sid
    env.close(sid)


def sh(env, sid, command, **kw):
    """run_terminal_cmd observation."""
    return env.call(sid, "run_terminal_cmd", {"command": command, **kw})


def contained(env, attacker, bystander, canary):
    """The host canary, the bystander and the attacker's process table are as they should be."""
    path, secret = canary
    with open(path) as f:
        assert f.read() == secret
    obs = sh(env, bystander, "cat mine.txt")
    assert obs.ok and obs.fields["stdout"] == "bystander data"
    info = env.info(attacker)
    assert envtest.pids_in_pidns(info["pidns"]) == [info["pid"]]  # only the agent is left


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
    for probe in ("cat /proc/1/mem", "ls /proc/1/fd", "cat /proc/1/environ",
                  "python3 -c 'import ctypes, sys; sys.exit(ctypes.CDLL(None).ptrace(16, 1, 0, 0) != 0)'"):
        assert sh(env, attacker, probe).fields["exit_code"] != 0, probe  # the agent cannot be traced or read
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
    assert lines[1] == "dns gaierror" and lines[2] == "1"  # no resolver reachable; only the route table header
    assert not sink.received() and len(upstream.seen) == seen
    sink.close()
    contained(env, attacker, bystander, canary)


def test_proxy_bypass_and_disallowed_hosts(env, attacker, bystander, canary, upstream):
    seen = len(upstream.seen)
    code = (f"import socket, sys\n"
            f"for target in [b'http://127.0.0.1:{upstream.port}@blocked.invalid:{upstream.port}/', b'CONNECT',"
            f" b'http://blocked.invalid:{upstream.port}/']:\n"
            f"    s = socket.socket(socket.AF_UNIX); s.connect('/run/egress.sock')\n"
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

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], len(envtest.pids_in_pidns(pidns)))

    bomb = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)\n"
    env.call(attacker, "write_file", {"path": "bomb.py", "content": bomb})  # every process keeps forking, forever
    watcher = threading.Thread(target=watch)
    watcher.start()
    obs = sh(env, attacker, "python3 bomb.py", timeout=4)  # never exits: it catches every failed fork
    done.set()
    watcher.join()
    assert obs.error == "timeout"
    assert 32 < peak[0] <= 64  # it multiplied up to the sandbox's process limit and no further
    contained(env, attacker, bystander, canary)
    assert sh(env, attacker, "echo recovered").fields["stdout"] == "recovered\n"
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
    obs = sh(env, attacker, "head -c 1G /dev/zero | tr '\\0' a", timeout=30)
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


def test_background_processes_left_behind(env, attacker, bystander, canary):
    daemon = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(1000)\n"
    env.call(attacker, "write_file", {"path": "daemon.py", "content": daemon})
    obs = sh(env, attacker, "sleep 1000 & setsid sleep 1001 & (nohup sleep 1002 >/dev/null 2>&1 &); "
                            "python3 daemon.py; echo back")
    assert obs.fields["stdout"] == "back\n" and obs.fields["wall_s"] < 5
    contained(env, attacker, bystander, canary)  # all four are gone once the command returns


def test_nested_namespaces_and_other_sandboxes_are_out_of_reach(env, attacker, bystander, canary):
    code = "import ctypes, sys; sys.exit(0 if ctypes.CDLL(None).unshare(0x10000000) == 0 else 1)"  # CLONE_NEWUSER
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
    assert got["unshare_user"] != "ok"  # --disable-userns: no nested user namespace to regain it in
    assert sh(env, attacker, "unshare -U true").fields["exit_code"] != 0
    contained(env, attacker, bystander, canary)


def test_metadata_calls_leave_every_host_inode_mounted_in_unchanged(env, attacker, bystander, canary):
    host = [os.path.join(env.rt.egress_dir, f"{attacker}.sock"), env.rt.agent_dir, "/usr", "/etc",
            *[f"/dev/{n}" for n in ("null", "zero", "full", "random", "urandom", "tty")]]
    before = {p: envtest.inode_facts(p) for p in host}
    obs = sh(env, attacker, _py(envtest.METADATA_ATTACK))
    done = json.loads(obs.fields["stdout"])
    assert not [d for d in done if d.split()[1] in ("/run/egress.sock", "/dev/null", "/usr", "/etc")], done
    assert {p: envtest.inode_facts(p) for p in host} == before  # mode, owner and mtime of each host inode
    assert "403" in sh(env, attacker, "curl -sS -m 5 -o /dev/null -w '%{http_code}' http://example.com/").content
    contained(env, attacker, bystander, canary)
