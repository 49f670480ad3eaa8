"""The VM backend (env/vm): image sandboxes as QEMU guests with memory snapshots, fork and restore.

What a files-only snapshot cannot do is what these tests check: a server started before a snapshot answers in every
fork and after a restore without being restarted (same pid, same start time), and a Python process's in-memory
variable (set over its socket, never written to disk) is read back in each fork. Every VM here boots for real (QEMU
with TCG on hosts without working KVM: tests/run.sh installs qemu-system-x86), so all but the config checks are slow.
"""

import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from composer2_jax.bench.policies import call
from composer2_jax.data import tokenizer as tk
from composer2_jax.env import Environment, SandboxConfig
from composer2_jax.env import testing as envtest
from composer2_jax.env.harness import (
    Completion,
    EpisodeOptions,
    HarnessConfig,
    fork_checkpoint,
    resume_episode,
    run_episode,
)
from composer2_jax.env.images import ImageBuilder
from composer2_jax.env.vm import vmm
from composer2_jax.rl.branching import NODE_CHOICE, ROOT, Branch, TreeConfig, grow_tree

HARBOR = Path(__file__).parent / "data" / "harbor"
ON_CI = os.environ.get("CI") == "true"
TOK = tk.ByteTokenizer()
MEM_PORT, WEB_PORT = 8770, 8771
MEMORY_SERVER = f"""
import http.server, os
state = {{"v": "unset"}}
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.startswith("/set/"):
            state["v"] = self.path[5:]
        body = f"{{state['v']}} {{os.getpid()}}".encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", {MEM_PORT}), H).serve_forever()
"""


def _problem() -> str | None:
    """Why VMs cannot run here (None if they can)."""
    missing = [b for b in ("qemu-system-x86_64", "qemu-img", "busybox", "mkfs.ext4", "podman", "debootstrap", "cpio")
               if shutil.which(b) is None]
    return envtest.host_problem() or (f"{', '.join(missing)} not installed (tests/run.sh installs them)"
                                      if missing else None)


PROBLEM = _problem()


def test_backend_and_vmm_settings_are_checked():
    with pytest.raises(ValueError, match="backend='firecracker'"):
        SandboxConfig(backend="firecracker")
    with pytest.raises(ValueError, match="vm_memory_mib=64"):
        SandboxConfig(backend="vm", vm_memory_mib=64)
    with pytest.raises(ValueError, match="vmm='xen'"):
        vmm.choose("xen")
    for bad in (0, 100_000, 200_001):  # root, the bwrap sandbox uid, inside the image sandboxes' id range
        with pytest.raises(ValueError, match=f"vm_uid={bad}"):
            SandboxConfig(backend="vm", vm_uid=bad)


@pytest.fixture(scope="module")
def image():
    if PROBLEM is not None:
        if ON_CI:
            pytest.fail(f"CI=true but VMs cannot run here: {PROBLEM}")
        pytest.skip(PROBLEM)
    builder = ImageBuilder()
    yield builder.build(HARBOR / "apt-pytest" / "environment")
    builder.close()


@pytest.fixture(scope="module")
def env(image):
    e = Environment(config=SandboxConfig(backend="vm"))
    yield e
    e.shutdown()


def sh(env, sid, command, **kw):
    """run_terminal_cmd; (exit code, stdout)."""
    obs = env.call(sid, "run_terminal_cmd", {"command": command, **kw})
    return obs.fields.get("exit_code"), obs.fields.get("stdout", obs.content)


def get(env, sid, port, path="/"):
    """GET 127.0.0.1:port/path inside the guest; the body, or the error text."""
    code, out = sh(env, sid, f"python3 -c \"import urllib.request as u; "
                             f"print(u.urlopen('http://127.0.0.1:{port}{path}', timeout=10).read().decode())\"")
    return out.strip() if code == 0 else f"failed ({code}): {out}"


def started(env, sid, pid):
    """The start time (clock ticks since boot) of a guest process, or None if it is gone."""
    code, out = sh(env, sid, f"cat /proc/{pid}/stat 2>/dev/null")
    return out.split(")")[1].split()[19] if code == 0 and out else None


@pytest.fixture(scope="module")
def warm(env, image):
    """A VM with a web server and a memory-holding Python process started, then memory-snapshotted."""
    sid = env.fork(env.import_image(image))
    assert env.call(sid, "write_file", {"path": "/srv/index.html", "content": "served from /srv"}).ok
    assert env.call(sid, "write_file", {"path": "/opt/mem.py", "content": MEMORY_SERVER}).ok
    code, out = sh(env, sid, f"cd /srv && (nohup python3 -m http.server {WEB_PORT} >/dev/null 2>&1 & echo $! > "
                             f"/tmp/web.pid) && (nohup python3 /opt/mem.py >/dev/null 2>&1 &) && sleep 3 && "
                             "cat /tmp/web.pid")
    assert code == 0, out
    web_pid = int(out.split()[-1])
    token = secrets.token_hex(8)
    value, mem_pid = get(env, sid, MEM_PORT, f"/set/{token}").split()
    assert value == token
    assert get(env, sid, WEB_PORT, "/index.html") == "served from /srv"
    ticks = {p: started(env, sid, p) for p in (web_pid, int(mem_pid))}
    snap = env.snapshot(sid)
    yield {"sid": sid, "snap": snap, "token": token, "web": web_pid, "mem": int(mem_pid), "ticks": ticks}
    env.close(sid)


@pytest.mark.slow
def test_vm_guest_runs_the_image_on_its_own_kernel_without_network(env, warm):
    sid = warm["sid"]
    code, out = sh(env, sid, "id -u; pwd; uname -r; python3 -m pytest --version 2>&1 | head -1; "
                             "tail -n +3 /proc/net/dev | cut -d: -f1")
    assert code == 0
    uid, cwd, kernel, pytest_line, *nets = out.split("\n")
    assert (uid, cwd) == ("0", "/app") and "pytest 8.3.3" in pytest_line
    assert kernel != os.uname().release and kernel.endswith("-cloud-amd64")  # the guest's own Debian kernel
    assert [n.strip() for n in nets if n.strip()] == ["lo"]  # the default policy allows no host: no network device
    assert env.call(sid, "read_file", {"path": "/srv/index.html"}).content == "served from /srv"
    assert env.info(sid)["vmm"]["kind"] == "qemu"


@pytest.mark.slow
def test_vm_fork_resumes_a_background_server_without_restart(env, warm):
    kids = [env.fork(warm["snap"]) for _ in range(2)]
    for kid in kids:
        assert get(env, kid, WEB_PORT, "/index.html") == "served from /srv"
        assert started(env, kid, warm["web"]) == warm["ticks"][warm["web"]]  # the same process, never restarted
    for kid in kids:
        env.close(kid)


@pytest.mark.slow
def test_vm_fork_reads_a_python_variable_set_before_the_snapshot(env, warm):
    kids = [env.fork(warm["snap"]) for _ in range(2)]
    for kid in kids:
        assert get(env, kid, MEM_PORT, "/get") == f"{warm['token']} {warm['mem']}"
        code, out = sh(env, kid, f"grep -rl {warm['token']} /app /srv /opt /tmp /root 2>/dev/null | wc -l")
        assert (code, out.strip()) == (0, "0")  # the value lives only in the process's memory
    for kid in kids:
        env.close(kid)


@pytest.mark.slow
def test_vm_forks_diverge_independently(env, warm):
    a, b = env.fork(warm["snap"]), env.fork(warm["snap"])
    assert get(env, a, MEM_PORT, "/set/alpha").startswith("alpha ")
    assert get(env, b, MEM_PORT, "/set/beta").startswith("beta ")
    assert sh(env, a, f"echo a > /srv/mine && kill -9 {warm['web']} && sleep 1 && echo ok")[1] == "ok\n"
    assert get(env, a, MEM_PORT, "/get").startswith("alpha ") and get(env, b, MEM_PORT, "/get").startswith("beta ")
    assert get(env, b, WEB_PORT, "/index.html") == "served from /srv"  # a's kill did not reach b
    assert get(env, a, WEB_PORT, "/").startswith("failed")
    assert sh(env, b, "cat /srv/mine")[0] != 0
    assert get(env, warm["sid"], MEM_PORT, "/get") == f"{warm['token']} {warm['mem']}"  # the parent is untouched
    snaps = set(env.snapshots())
    c = env.fork(a)  # a fork of a live VM: its memory as it is now, files included
    assert get(env, c, MEM_PORT, "/get").startswith("alpha ") and sh(env, c, "cat /srv/mine")[1] == "a\n"
    assert set(env.snapshots()) == snaps  # the private snapshot it went through is not left behind
    for sid in (a, b, c):
        env.close(sid)


@pytest.mark.slow
def test_vm_restore_after_a_destructive_command_brings_the_processes_back(env, image, warm):
    sid = env.fork(warm["snap"])
    code, _ = sh(env, sid, f"kill -9 {warm['web']} {warm['mem']}; rm -rf /srv /opt /app; sleep 1")
    assert code == 0
    assert get(env, sid, WEB_PORT).startswith("failed") and sh(env, sid, "ls /app")[0] != 0
    env.restore(sid, warm["snap"])
    assert get(env, sid, MEM_PORT, "/get") == f"{warm['token']} {warm['mem']}"
    assert get(env, sid, WEB_PORT, "/index.html") == "served from /srv"
    assert started(env, sid, warm["web"]) == warm["ticks"][warm["web"]]
    assert sh(env, sid, "ls /app/inventory.py")[0] == 0
    env.restore(sid, env.import_image(image))  # an image snapshot has no memory: a cold boot, no server
    assert get(env, sid, WEB_PORT).startswith("failed") and sh(env, sid, "ls /srv/index.html")[0] != 0
    env.close(sid)


class KeepAlivePolicy:
    """Reply 0 writes and starts the memory server and sets its value; reply 1 reads the value back (a command that
    fails if the process is gone or lost its memory); reply 2 submits."""

    REPLIES = (
        call("write_file", path="/opt/mem.py", content=MEMORY_SERVER) + call(
            "run_terminal_cmd", command=f"(nohup python3 /opt/mem.py >/dev/null 2>&1 &); sleep 3; python3 -c "
                                        f"\"import urllib.request as u; u.urlopen('http://127.0.0.1:{MEM_PORT}/set/tree')\""),
        call("run_terminal_cmd", command=f"python3 -c \"import urllib.request as u, sys; sys.exit(0 if u.urlopen("
                                         f"'http://127.0.0.1:{MEM_PORT}/get').read().startswith(b'tree ') else 3)\""),
        call("submit"),
    )

    @classmethod
    def ids(cls, i):
        return TOK.encode(cls.REPLIES[i] + tk.IM_END, allow_special=True)

    def generate(self, prompt_ids, max_new_tokens):
        replies = TOK.decode(prompt_ids).count(f"{tk.IM_ASSISTANT}assistant") - 1
        ids = self.ids(min(replies, 2))
        return Completion(tuple(ids), (-0.5,) * len(ids))


@pytest.mark.slow
def test_vm_branching_rollout_resumes_a_branch_with_its_process_alive(env, image, monkeypatch):
    snap = env.import_image(image)
    cfg = HarnessConfig(max_turns=4, context_budget=20_000, system_prompt="Keep it alive.")
    policy = KeepAlivePolicy()

    def run(ckpt):
        if ckpt is None:
            sid = env.fork(snap)
            result = run_episode(env, sid, "Start the server, then check it.", policy, TOK, cfg,
                                 EpisodeOptions(checkpoints=True))
        else:
            sid = fork_checkpoint(env, ckpt)
            result = resume_episode(env, sid, ckpt, policy, TOK, cfg, EpisodeOptions(checkpoints=True))
        env.close(sid)
        return Branch(result, float(not any(r.failed for r in result.tool_calls)))

    monkeypatch.setitem(NODE_CHOICE, "after_turn_1", lambda f, rng: next(b for b in f.boundaries if f.turn[b] == 1))
    first = sum(len(KeepAlivePolicy.ids(i)) for i in range(3))
    group = grow_tree(run, TreeConfig(initial=1, branches=2, token_budget=first + 1, node_choice="after_turn_1"),
                      np.random.default_rng(0))
    resumed = [b for b in group.branches if b.start != ROOT]
    assert len(group.branches) == 3 and len(resumed) == 2
    for branch in resumed:
        assert group.checkpoints[branch.start].turn == 1
        check = [r for r in branch.result.tool_calls if r.name == "run_terminal_cmd"][-1]
        assert not check.failed, check  # the server started before the checkpoint answered with its memory intact
        assert branch.reward == 1.0
    for br in group.branches:
        for ckpt in br.result.checkpoints:
            if ckpt.snapshot in env.snapshots():
                env.delete_snapshot(ckpt.snapshot)


def _status(pid: int) -> dict[str, str]:
    """/proc/PID/status as a dict."""
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


@pytest.mark.slow
def test_vm_qemu_runs_unprivileged_without_capabilities_in_its_own_namespaces(env, warm, tmp_path):
    kid = env.fork(warm["snap"])  # a resumed VM; `warm` itself was cold-booted: check both
    for sid in (warm["sid"], kid):
        info = env.info(sid)
        pid, status = info["pid"], _status(info["pid"])
        assert status["Name"] == "qemu-system-x86"
        uid = env.rt.config.vm_uid
        assert status["Uid"].split() == [str(uid)] * 4 and status["Gid"].split() == [str(uid)] * 4
        assert status["Groups"].strip() == ""
        assert status["CapEff"] == status["CapPrm"] == status["CapBnd"] == "0000000000000000"
        assert status["NoNewPrivs"] == "1"
        for ns in ("mnt", "pid", "net", "ipc", "user"):
            assert os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}"), ns
        assert not os.path.exists(f"/proc/{pid}/root{tmp_path}")  # the host's tmp is not in its mount namespace
        assert info["cgroups"] and all(os.path.exists(os.path.join(d, "cgroup.procs")) for d in info["cgroups"])
        for d in info["cgroups"]:
            with open(os.path.join(d, "cgroup.procs")) as f:
                assert str(pid) in f.read().split()
        vm = env._record(sid).sandbox.vm
        secret = os.path.join(vm.workdir, "root-only")  # in its own (visible, writable) work dir, but root's 0600
        with open(secret, "w") as f:
            f.write("host secret")
        os.chmod(secret, 0o600)
        for path in (secret, "/etc/shadow"):  # asked over QMP to open a root-only file, QEMU cannot
            with pytest.raises(vmm.VmError, match="Permission denied"):
                vm.qmp.cmd("blockdev-add", driver="file", filename=path, **{"node-name": "steal"})
        frozen = [f for f in os.listdir(os.path.dirname(vm.disk)) if f != os.path.basename(vm.disk)]
        for name in frozen:  # snapshot layers and state files are root's: no VM can change what forks read
            st = os.stat(os.path.join(os.path.dirname(vm.disk), name))
            assert (st.st_uid, st.st_mode & 0o777) == (0, 0o644), name
        assert os.stat(vm.disk).st_uid == uid
    assert get(env, kid, MEM_PORT).split()[0] == warm["token"]  # and the resumed VM works as before
    env.close(kid)


def test_vm_jail_runs_a_command_unprivileged_and_shows_it_only_its_own_files(tmp_path):
    if envtest.host_problem() is not None:
        if ON_CI:
            pytest.fail(f"CI=true but sandboxes cannot run here: {envtest.host_problem()}")
        pytest.skip(envtest.host_problem())
    config = SandboxConfig(backend="vm")
    public = Path(tempfile.mkdtemp(prefix="vm-jail-"))  # reachable by vm_uid, as the runtime's public dir is
    try:
        _run_in_jail(config, public, tmp_path)
    finally:
        shutil.rmtree(public)


def _run_in_jail(config, public, tmp_path):
    """The checks of test_vm_jail_runs_a_command_unprivileged_and_shows_it_only_its_own_files."""
    from composer2_jax.env.vm.jail import Binds, Jail

    (public / "own").mkdir()
    os.chmod(public, 0o711)
    jail = Jail(config, str(public))
    own = str(public / "own")
    jail.give(own, 0o700)
    (public / "own" / "secret").write_text("root only")
    os.chmod(public / "own" / "secret", 0o600)
    (tmp_path / "elsewhere").write_text("not bound")
    script = ("grep -E '^(Uid|Gid|Groups|CapEff|CapBnd|NoNewPrivs):' /proc/self/status; "
              f"cat {own}/secret || echo secret-denied; cat {tmp_path}/elsewhere || echo elsewhere-absent; "
              f"echo x > {own}/mine && echo wrote-own; echo x > {jail.pipe} || echo pipe-read-only")
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    argv = jail.argv(Binds((own,), (jail.pipe,)), ["/bin/sh", "-c", script], False, info_w, block_r)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, pass_fds=(info_w, block_r),
                            text=True)
    os.close(info_w)
    os.close(block_r)
    os.write(block_w, b"1")
    out, _ = proc.communicate(timeout=60)
    os.close(block_w)
    os.close(info_r)
    fields = dict(line.split(":\t", 1) for line in out.splitlines() if ":\t" in line)
    uid = str(config.vm_uid)
    assert fields["Uid"].split() == [uid] * 4 and fields["Gid"].split() == [uid] * 4, out
    assert fields["Groups"].strip() == "" and fields["NoNewPrivs"] == "1", out
    assert fields["CapEff"] == fields["CapBnd"] == "0000000000000000", out
    lines = out.splitlines()
    assert "secret-denied" in lines and "elsewhere-absent" in lines, out  # root's 0600 file; a path not bound
    assert "wrote-own" in lines and "pipe-read-only" in lines, out
    assert os.stat(public / "own" / "mine").st_uid == config.vm_uid
