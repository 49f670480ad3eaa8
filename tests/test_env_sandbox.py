"""Real sandboxes: isolation, read-only system, snapshot / fork / restore, limits, reaping, layer GC."""

import os
import threading

import pytest

from composer2_jax.env import Environment, SandboxConfig, SandboxLimits
from composer2_jax.env import testing as envtest

pytestmark = pytest.mark.skipif(envtest.host_problem() is not None, reason=f"no sandboxes: {envtest.host_problem()}")
MiB = 1 << 20
XCPU = (-24, -9, 128 + 24, 128 + 9)  # SIGXCPU, then SIGKILL: as the process's own status or via its shell


def sh(env, sid, command, **kw):
    """run_terminal_cmd, returning the observation."""
    return env.call(sid, "run_terminal_cmd", {"command": command, **kw})


def out(env, sid, command, **kw):
    """stdout of a command that must succeed."""
    obs = sh(env, sid, command, **kw)
    assert obs.ok and obs.fields["exit_code"] == 0, obs.content
    return obs.fields["stdout"]


@pytest.fixture(scope="module")
def env():
    e = Environment(pool_size=2, limits=SandboxLimits(timeout_s=30))
    yield e
    e.shutdown()


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return envtest.make_repo(str(tmp_path_factory.mktemp("repo")),
                             {"README": "original\n", "src/app.py": "print('app')\n", "docs/a.txt": "doc\n"})


def test_sandbox_runs_stdlib_python_without_privileges(env, repo):
    sid = env.create(repo)
    text = out(env, sid, "python3 -c 'import json, sqlite3, ssl, subprocess; print(json.dumps([1]))'; id -u; hostname;"
                         " grep CapEff /proc/self/status; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
    lines = text.split()
    assert lines[:3] == ["[1]", "1000", "sandbox"]
    assert "0000000000000000" in text
    assert lines[-1] == "lo" and text.count("lo") == 1  # loopback is the only interface
    assert out(env, sid, "python3 src/app.py") == "app\n"
    env.close(sid)


def test_every_namespace_is_fresh(env):
    sid = env.create()
    pid = env.info(sid)["pid"]
    for ns in ("user", "pid", "mnt", "ipc", "uts", "net"):
        assert os.stat(f"/proc/{pid}/ns/{ns}").st_ino != os.stat(f"/proc/self/ns/{ns}").st_ino, ns
    env.close(sid)


def test_system_is_read_only_and_tmp_is_writable(env):
    sid = env.create()
    for path in ("/usr/x", "/etc/x", "/x", "/dev/x", "/opt/sandbox-guest/x"):
        obs = sh(env, sid, f"touch {path}")
        assert obs.fields["exit_code"] != 0, path
    assert out(env, sid, "echo ok > /tmp/x && cat /tmp/x") == "ok\n"
    env.close(sid)


def state(env, sid):
    """(content of a.txt, set of top-level names) of a sandbox's workspace."""
    text = out(env, sid, "cat a.txt; echo; echo ---; ls")
    content, names = text.split("\n---\n")
    return content.strip(), set(names.split())


def test_fork_isolation_both_ways(env, repo):
    parent = env.create(repo)
    env.call(parent, "write_file", {"path": "a.txt", "content": "parent-1"})
    kid, sibling = env.fork(parent), env.fork(parent)
    out(env, kid, "echo kid > a.txt && echo k > k.txt && rm README")
    original = {"a.txt", "README", "docs", "src"}
    for sid in (parent, sibling):  # the fork's writes and deletes are invisible to its parent and its sibling
        assert state(env, sid) == ("parent-1", original)
    out(env, parent, "echo parent-2 > a.txt && echo p > p.txt")
    assert state(env, kid) == ("kid", {"a.txt", "k.txt", "docs", "src"})  # the parent's later writes are invisible
    assert state(env, sibling) == ("parent-1", original)
    assert state(env, parent) == ("parent-2", original | {"p.txt"})
    for sid in (parent, kid, sibling):
        env.close(sid)


def test_forks_of_a_snapshot_copy_nothing_and_stay_apart(env, repo):
    sid = env.create(repo)
    snap = env.snapshot(sid)
    layers = env.rt.layers.root
    before = set(os.listdir(layers))
    kids = [env.fork(snap) for _ in range(3)]
    assert set(os.listdir(layers)) == before  # copy-on-write: forking adds no layer and copies no file
    for i, kid in enumerate(kids):
        env.call(kid, "write_file", {"path": "mine.txt", "content": str(i)})
    for i, kid in enumerate(kids):
        assert out(env, kid, "cat mine.txt") == str(i)
    assert sh(env, sid, "cat mine.txt").fields["exit_code"] != 0
    for s in (sid, *kids):
        env.close(s)


def test_restore_returns_files_and_kills_processes(env, repo):
    sid = env.create(repo)
    snap = env.snapshot(sid)
    out(env, sid, "echo changed > README && rm -r docs && mkdir -p new/deep && echo x > new/deep/f")
    env.restore(sid, snap)
    assert out(env, sid, "cat README; ls | sort") == "original\nREADME\ndocs\nsrc\n"
    assert sh(env, sid, "echo again > README").ok
    env.restore(sid, snap)
    assert out(env, sid, "cat README") == "original\n"
    env.close(sid)


def test_snapshot_of_unchanged_sandbox_adds_no_layer(env, repo):
    sid = env.create(repo)
    env.snapshot(sid)
    chain = env.info(sid)["chain"]
    env.snapshot(sid)
    assert env.info(sid)["chain"] == chain
    env.call(sid, "write_file", {"path": "n.txt", "content": "n"})
    env.snapshot(sid)
    assert env.info(sid)["chain"][1:] == chain
    env.close(sid)


def test_deep_snapshot_chains_are_squashed(tmp_path):
    config = SandboxConfig(max_layers=3)
    with Environment(config=config, pool_size=0) as e:
        sid = e.create(envtest.make_repo(str(tmp_path), {"keep.txt": "k", "gone.txt": "g"}))
        for i in range(5):
            out(e, sid, f"echo {i} > step{i}.txt" + (" && rm gone.txt" if i == 2 else ""))
            snap = e.snapshot(sid)
            assert len(e.info(sid)["chain"]) <= 3
        kid = e.fork(snap)
        assert set(out(e, kid, "ls").split()) == {"keep.txt", *(f"step{i}.txt" for i in range(5))}
        assert out(e, kid, "cat step4.txt") == "4\n"


def test_unused_layers_are_deleted(env, repo):
    sid = env.create(repo)
    env.call(sid, "write_file", {"path": "n.txt", "content": "n"})
    snap = env.snapshot(sid)
    chain = set(env.rt.layers.root and os.listdir(env.rt.layers.root))
    env.close(sid)
    assert set(os.listdir(env.rt.layers.root)) == chain  # the snapshot keeps its layers
    env.delete_snapshot(snap)
    left = set(os.listdir(env.rt.layers.root))
    assert len(left) < len(chain)


def test_close_reaps_every_process_even_mid_command(env):
    sid = env.create()
    info = env.info(sid)
    result = {}
    t = threading.Thread(target=lambda: result.update(obs=sh(env, sid, "sleep 300 & sleep 301 & sleep 302")))
    t.start()
    for _ in range(200):
        if len(envtest.pids_in_pidns(info["pidns"])) >= 4:
            break
        threading.Event().wait(0.01)
    assert len(envtest.pids_in_pidns(info["pidns"])) >= 4  # guest, shell, sleeps
    env.close(sid)
    t.join(10)
    assert result["obs"].error == "sandbox_error"
    assert envtest.pids_in_pidns(info["pidns"]) == []
    assert not any(os.path.exists(d) for d in info["cgroups"])


def test_closed_sandboxes_stay_readable_up_to_closed_kept(env, monkeypatch):
    """A closed sandbox's episode stays readable, but only the newest CLOSED_KEPT ones (a long RL run closes
    millions); the VM backend retires its records through the same path."""
    from composer2_jax.env import environment

    monkeypatch.setattr(environment, "CLOSED_KEPT", 2)
    sids = [env.create() for _ in range(3)]
    for sid in sids:
        env.close(sid)
    with pytest.raises(KeyError, match=sids[0]):
        env.episode(sids[0])
    assert all(env.episode(sid)["calls"] == 0 for sid in sids[1:])
    with pytest.raises(KeyError, match="no live sandbox"):
        env.close(sids[2])


def test_base_dir_is_configurable(tmp_path):
    base = tmp_path / "env-state"
    with Environment(base_dir=str(base), pool_size=0) as e:
        sid = e.create(envtest.make_repo(str(tmp_path / "r"), {"f": "x"}))
        assert out(e, sid, "cat f") == "x"
        assert os.path.isdir(base / "layers") and os.path.isdir(base / "logs")
        public = e.rt.public
    assert base.is_dir() and not os.path.exists(public)  # a caller's dir is kept; the public dir is removed


# ------------------------------------------------------------------------------------------------------ limits


@pytest.fixture(scope="module")
def tight():
    limits = SandboxLimits(timeout_s=5, cpu_s=1, memory_bytes=256 * MiB, file_size_bytes=8 * MiB, processes=48,
                           disk_bytes=32 * MiB, tmp_bytes=16 * MiB, output_bytes=1000, output_kill_bytes=4 * MiB,
                           sandbox_memory_bytes=320 * MiB)
    e = Environment(pool_size=1, limits=limits)
    yield e
    e.shutdown()


@pytest.fixture(scope="module")
def tsid(tight):
    return tight.create()


def test_wall_timeout(tight, tsid):
    obs = sh(tight, tsid, "echo before; sleep 30", timeout=1)
    assert obs.error == "timeout" and obs.fields["timed_out"] and obs.fields["wall_s"] < 5
    assert "before" in obs.content


def test_cpu_seconds(tight, tsid):
    obs = sh(tight, tsid, "python3 -c 'while True: pass'", timeout=30)
    assert obs.fields["exit_code"] in XCPU and not obs.fields["timed_out"]


def test_memory_per_process(tight, tsid):
    obs = sh(tight, tsid, "python3 -c 'x = bytearray(512 << 20)'", timeout=30)
    assert obs.fields["exit_code"] == 1 and "MemoryError" in obs.fields["stderr"]


def test_file_size(tight, tsid):
    obs = sh(tight, tsid, "dd if=/dev/zero of=f bs=1M count=20; stat -c %s f; rm f")
    assert any(m in obs.fields["stderr"] for m in ("File too large", "File size limit exceeded"))  # EFBIG or SIGXFSZ
    assert obs.fields["stdout"].strip() == str(8 * MiB)


def test_process_count(tight, tsid):
    code = ("import subprocess\nps = []\ntry:\n    for _ in range(100): ps.append(subprocess.Popen(['sleep', '3']))\n"
            "except OSError as e: print(e.errno)\nprint(len(ps))")
    tight.call(tsid, "write_file", {"path": "spawn.py", "content": code})
    errno_eagain, started = map(int, sh(tight, tsid, "python3 spawn.py", timeout=30).fields["stdout"].split())
    assert errno_eagain == 11 and started < 48  # guest + shell + python + sleeps stay within 48


def test_workspace_and_tmp_disk(tight, tsid):
    fill = ("i=0; while [ $i -lt 20 ] && dd if=/dev/zero of={d}/f$i bs=1M count=6 2>/tmp/err; do i=$((i+1)); done; "
            "cat /tmp/err; du -sm {d} | cut -f1; rm -f {d}/f*")
    obs = sh(tight, tsid, fill.format(d="/workspace") + "; " + fill.format(d="/dev/shm"), timeout=30)
    assert obs.fields["stderr"] == "" and obs.fields["stdout"].count("No space left") == 2
    ws, shm = (int(line) for line in obs.fields["stdout"].splitlines() if line.isdigit())
    assert 24 <= ws <= 32 and 12 <= shm <= 16  # the workspace and the tmpfs fill up to their limits, no further
    assert sh(tight, tsid, "echo ok > after.txt && cat after.txt").fields["stdout"] == "ok\n"


def test_output_is_truncated_with_marker(tight, tsid):
    obs = sh(tight, tsid, "python3 -c \"print('A' * 5000 + 'END')\"")
    assert obs.fields["stdout_bytes"] == 5004 and obs.fields["stdout_truncated"]
    assert obs.fields["stdout"].startswith("A" * 500) and obs.fields["stdout"].endswith("END\n")
    assert "[... 4004 bytes truncated ...]" in obs.content


def test_sandbox_memory_cgroup(tight, tsid):
    if not tight.rt.cgroups.available:
        pytest.skip(tight.rt.cgroups.reason)
    code = "import time; x = bytearray(200 << 20); x[::4096] = b'x' * len(x[::4096]); time.sleep(3)"
    obs = sh(tight, tsid, f"for i in 1 2 3; do (python3 -c \"{code}\"; echo rc=$?) & done; wait", timeout=30)
    codes = sorted(obs.fields["stdout"].split())
    assert len(codes) == 3 and "rc=137" in codes  # 3 x 200 MiB > 320 MiB: the OOM killer took one (SIGKILL)
    assert sh(tight, tsid, "echo alive").fields["stdout"] == "alive\n"


def test_sandbox_cpu_budget():
    with Environment(pool_size=0, limits=SandboxLimits(cpu_s=1, sandbox_cpu_s=1.5)) as e:
        sid = e.create()
        busy = "python3 -c 'while True: pass'"
        assert sh(e, sid, busy).fields["exit_code"] in XCPU
        sh(e, sid, busy)
        obs = sh(e, sid, "true")
        assert obs.error == "cpu_budget_exhausted"
