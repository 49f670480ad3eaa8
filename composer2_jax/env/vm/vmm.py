"""The virtual machine monitor: which one runs here, and one QEMU process per VM driven over QMP.

vmm choice (`choose`): Firecracker where its binary and a working /dev/kvm are present (it is detected and
reported, but this module drives QEMU, so such a host runs QEMU with KVM: docs/env.md), QEMU with KVM where a KVM
guest boots (probed with a timeout: on a host that is itself a Firecracker guest, nested KVM guests hang at early
boot), and QEMU with TCG (full emulation: correct, slower) otherwise.

A VM is `QemuVM`: no network device unless the spec names an egress socket (then a user-mode network restricted
to one forward into that socket), a read-only runtime disk, the sandbox's own qcow2 overlay as its root disk and a
virtio-serial port for the tool RPC. `snapshot` stops the guest, switches it to a fresh overlay (the old one, now
frozen, is the snapshot's disk), writes memory and device state to a file (QEMU migration) and resumes it;
`QemuVM(..., incoming=state_file)` starts a VM from such a file. Every QEMU process runs confined (env/vm/jail.py:
an unprivileged uid, no capabilities, its own namespaces and cgroup, only its own files in view).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import time

from composer2_jax.env.sandbox import SandboxError, _read_info
from composer2_jax.env.vm import assets
from composer2_jax.env.vm.jail import TB_MIB, Binds, Jail, backing_chain

QEMU = "qemu-system-x86_64"
HERE = os.path.dirname(os.path.abspath(__file__))
_KVM_PROBE: dict[str, tuple[bool, str]] = {}


class VmError(RuntimeError):
    """A VM failed to start, snapshot or answer."""


@dataclasses.dataclass(frozen=True)
class Vmm:
    """The chosen monitor: kind ("qemu"), accel ("kvm" or "tcg") and why."""

    kind: str
    accel: str
    reason: str


def kvm_works(timeout_s: float = 20.0) -> tuple[bool, str]:
    """Whether a KVM guest boots here: /dev/kvm opens and a probe guest prints its marker within timeout_s.

    The answer is kept for the process and, per boot of the host (/proc/sys/kernel/random/boot_id), in the VM cache.
    """
    if "kvm" in _KVM_PROBE:
        return _KVM_PROBE["kvm"]
    with open("/proc/sys/kernel/random/boot_id") as f:
        record = os.path.join(assets.cache_dir(), f"kvm-probe-{f.read().strip()}.json")
    if os.path.exists(record):
        with open(record) as f:
            _KVM_PROBE["kvm"] = tuple(json.load(f))
        return _KVM_PROBE["kvm"]
    _KVM_PROBE["kvm"] = _probe_kvm(timeout_s)
    os.makedirs(assets.cache_dir(), exist_ok=True)
    with open(record + ".tmp", "w") as f:
        json.dump(list(_KVM_PROBE["kvm"]), f)
    os.replace(record + ".tmp", record)
    return _KVM_PROBE["kvm"]


def _probe_kvm(timeout_s: float) -> tuple[bool, str]:
    """Boot the probe guest with KVM (see kvm_works)."""
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
    except OSError as e:
        result = (False, f"/dev/kvm: {e.strerror}")
    else:
        argv = [qemu_path(), "-accel", "kvm", "-cpu", "host", "-m", "128", "-nodefaults", "-no-user-config",
                "-display", "none", "-serial", "stdio", "-no-reboot", "-kernel",
                os.path.join(assets.kernel_dir(), "vmlinuz"), "-initrd", assets.initramfs(),
                "-append", "console=ttyS0 quiet panic=-1 vm.probe=1"]
        try:
            out = subprocess.run(argv, capture_output=True, timeout=timeout_s, check=False).stdout
            result = (b"VM-PROBE-OK" in out, "a KVM guest booted" if b"VM-PROBE-OK" in out
                      else f"a KVM guest exited without booting: {out[-300:]!r}")
        except subprocess.TimeoutExpired:
            result = (False, f"a KVM guest did not boot within {timeout_s:g} s (nested KVM hangs on this host)")
    return result


def choose(requested: str = "auto") -> Vmm:
    """The monitor for requested ("auto", "qemu-kvm", "qemu-tcg"); a clear error for an unknown or unusable one."""
    if requested not in ("auto", "qemu-kvm", "qemu-tcg"):
        raise ValueError(f"vmm={requested!r}; expected 'auto', 'qemu-kvm' or 'qemu-tcg'")
    qemu_path()
    if requested == "qemu-tcg":
        return Vmm("qemu", "tcg", "asked for")
    ok, why = kvm_works()
    if requested == "qemu-kvm":
        if not ok:
            raise VmError(f"vmm='qemu-kvm' but KVM does not work here: {why}")
        return Vmm("qemu", "kvm", why)
    if ok:
        fc = shutil.which("firecracker")
        note = f"; firecracker at {fc} is not driven by this backend" if fc else ""
        return Vmm("qemu", "kvm", why + note)
    return Vmm("qemu", "tcg", f"no KVM: {why}")


def qemu_path() -> str:
    """The QEMU binary, or a clear error naming the Debian package."""
    path = shutil.which(QEMU)
    if path is None:
        raise FileNotFoundError(f"{QEMU} not found; install it (Debian: apt-get install -y qemu-system-x86 qemu-utils)")
    return path


def new_overlay(path: str, backing: str, backing_format: str = "qcow2", size: int | None = None) -> None:
    """A qcow2 file at path whose reads fall through to backing (qemu-img create -b); with size (bytes) the backing
    is not opened (-u: it may be in use by a running VM)."""
    unsafe = ["-u"] if size is not None else []
    proc = subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", backing_format, "-b", backing, *unsafe,
                           path, *([str(size)] if size is not None else [])], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise VmError(f"qemu-img create {path} on {backing} failed: {proc.stderr.strip()}")


@dataclasses.dataclass(frozen=True)
class VmSpec:
    """What every VM of an Environment shares (a fork must match its snapshot's spec exactly)."""

    accel: str = "tcg"  # "kvm" or "tcg"
    memory_mib: int = 512  # guest RAM
    cpus: int = 1  # guest vCPUs
    hostname: str = "sandbox"  # the guest's hostname
    pids: int = 272  # pids.max of the guest process's cgroup: it and every process its commands start (vm.pids=)
    boot_timeout_s: float = 120.0  # how long a cold boot may take to say hello


class Qmp:
    """A minimal synchronous QMP client (commands answered in order; events are skipped)."""

    def __init__(self, path: str, timeout_s: float):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.sock.connect(path)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise VmError(f"QMP socket {path} did not open within {timeout_s:g} s") from None
                time.sleep(0.02)
        self.sock.settimeout(timeout_s)
        self.buf = b""
        self._line()  # greeting
        self.cmd("qmp_capabilities")

    def _line(self) -> dict:
        """The next JSON line."""
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise VmError("QEMU closed its QMP socket")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def cmd(self, name: str, **arguments) -> object:
        """Run one command; its return value, or VmError with QEMU's message."""
        self.sock.sendall(json.dumps({"execute": name, **({"arguments": arguments} if arguments else {})}).encode())
        while True:
            msg = self._line()
            if "return" in msg:
                return msg["return"]
            if "error" in msg:
                raise VmError(f"QMP {name} {arguments}: {msg['error'].get('desc')}")

    def close(self) -> None:
        """Drop the connection."""
        self.sock.close()


class QemuVM:
    """One QEMU process: a guest booted cold, or resumed from a state file (`incoming`), on its own disk overlay."""

    def __init__(self, spec: VmSpec, workdir: str, disk: str, jail: Jail, incoming: str | None = None,
                 egress_socket: str | None = None):
        self.spec, self.workdir, self.disk, self.jail = spec, workdir, disk, jail
        self.incoming, self.egress_socket = incoming, egress_socket
        os.makedirs(workdir, exist_ok=True)
        jail.give(workdir, 0o700)
        self.rpc_path = os.path.join(workdir, "rpc.sock")
        self.qmp_path = os.path.join(workdir, "qmp.sock")
        self.console = os.path.join(workdir, "console.log")
        self.proc: subprocess.Popen | None = None  # the outer bwrap (QEMU is its grandchild, in its pid namespace)
        self.qemu_pid: int | None = None
        self.cgroup_dirs: list[str] = []
        self.qmp: Qmp | None = None

    def argv(self) -> list[str]:
        """The QEMU command line (identical for a cold boot and a resume but for -incoming)."""
        spec = self.spec
        cmdline = f"console=ttyS0 quiet panic=-1 vm.hostname={spec.hostname} vm.pids={spec.pids}"
        net = ["-nic", "none"]
        if self.egress_socket:
            cmdline += " vm.egress=3128"
            pipe = self.jail.pipe_command(self.egress_socket)
            net = ["-netdev", f"user,id=n0,restrict=on,guestfwd=tcp:10.0.2.100:3128-cmd:{pipe}",
                   "-device", "virtio-net-pci,netdev=n0,romfile="]
        accel = spec.accel if spec.accel == "kvm" else f"tcg,tb-size={TB_MIB}"
        return [qemu_path(), "-accel", accel, "-cpu", "host" if spec.accel == "kvm" else "max",
                "-machine", "pc", "-m", str(spec.memory_mib), "-smp", str(spec.cpus),
                "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", *net,
                "-chardev", f"file,id=con,path={self.console},append=on", "-serial", "chardev:con",
                "-kernel", os.path.join(assets.kernel_dir(), "vmlinuz"), "-initrd", assets.initramfs(),
                "-append", cmdline,
                "-drive", f"if=none,id=rt,file={assets.runtime_disk()},format=raw,readonly=on",
                "-device", "virtio-blk-pci,drive=rt",
                "-drive", f"if=none,id=disk0,file={self.disk},format=qcow2,cache=unsafe",
                "-device", "virtio-blk-pci,drive=disk0",
                "-device", "virtio-serial-pci", "-chardev", f"socket,id=rpc,path={self.rpc_path},server=on,wait=off",
                "-device", "virtserialport,chardev=rpc,name=rpc",
                "-qmp", f"unix:{self.qmp_path},server=on,wait=off",
                *(["-incoming", "defer"] if self.incoming else [])]

    def binds(self) -> Binds:
        """The host files this VM's QEMU may see (jail.py): its work and disk dirs, and each file it reads."""
        disk_dir = os.path.dirname(self.disk)
        ro = [os.path.join(assets.kernel_dir(), "vmlinuz"), assets.initramfs(), assets.runtime_disk()]
        ro += [f for f in backing_chain(self.disk)[1:] + ([self.incoming] if self.incoming else [])
               if os.path.dirname(f) != disk_dir]
        if self.egress_socket:
            ro += [self.jail.pipe, self.egress_socket]
        return Binds((self.workdir, disk_dir), tuple(dict.fromkeys(ro)))

    def _spawn(self) -> None:
        """Start the confined QEMU: bwrap reports its child, the host puts it in the VM's cgroup, then QEMU runs."""
        info_r, info_w = os.pipe()
        block_r, block_w = os.pipe()
        try:
            argv = self.jail.argv(self.binds(), self.argv(), self.spec.accel == "kvm", info_w, block_r)
            with open(os.path.join(self.workdir, "qemu.log"), "ab") as log:
                self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                             start_new_session=True, pass_fds=(info_w, block_r))
            os.close(info_w)
            os.close(block_r)
            info_w = block_r = -1
            init = _read_info(info_r, 30.0)["child-pid"]
            self.cgroup_dirs = self.jail.cgroup(f"{os.path.basename(os.path.dirname(self.workdir))}-"
                                                f"{os.path.basename(self.workdir)}", self.spec.memory_mib)
            if self.cgroup_dirs:
                self.jail.cgroups.attach(self.cgroup_dirs, init)
            os.write(block_w, b"1")
            self.qemu_pid = self._child_of(init)
        finally:
            for fd in (info_r, info_w, block_r, block_w):
                if fd >= 0:
                    os.close(fd)

    def _child_of(self, pid: int, timeout_s: float = 30.0) -> int:
        """The first child of pid (bwrap's init in the VM's pid namespace: its child is QEMU)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{pid}/task/{pid}/children") as f:
                    kids = f.read().split()
            except OSError:
                kids = []
            if kids:
                return int(kids[0])
            if self.proc.poll() is not None:
                break
            time.sleep(0.01)
        raise VmError(f"the confined QEMU did not start (bwrap exited {self.proc.poll()})")

    def start(self) -> None:
        """Start QEMU and, for a resume, load the state file and let the guest run."""
        try:
            self._spawn()
            self.qmp = Qmp(self.qmp_path, 30.0)
            if self.incoming:
                self.qmp.cmd("migrate-incoming", uri=f"exec:cat {self.incoming}")
                self._wait(lambda: self.qmp.cmd("query-status")["status"] != "inmigrate", "loading the state")
                self.qmp.cmd("cont")
        except (OSError, ValueError, KeyError, VmError, SandboxError) as e:
            self.kill()
            raise VmError(f"QEMU failed: {e}; {self.log_tail()}") from None

    def connect_rpc(self) -> socket.socket:
        """A connection to the guest's RPC port."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(self.rpc_path)
        return sock

    def snapshot(self, state_path: str, next_disk: str) -> str:
        """Freeze the guest's memory and devices into state_path and its disk as it stands; the frozen disk's path.

        The guest is stopped, moved to a fresh overlay next_disk (so the old overlay never changes again), its state
        migrated to the file, and resumed: it goes on as if nothing happened.
        """
        frozen = self.disk
        self.qmp.cmd("stop")
        try:
            size = next(b["inserted"]["image"]["virtual-size"] for b in self.qmp.cmd("query-block")
                        if b["device"] == "disk0")
            new_overlay(next_disk, frozen, "qcow2", size)  # made by root: QEMU cannot create files (jail.py)
            self.jail.give(next_disk)
            self.qmp.cmd("blockdev-snapshot-sync", device="disk0", **{"snapshot-file": next_disk}, format="qcow2",
                         mode="existing")
            self.disk = next_disk
            self.jail.seal(frozen)
            os.close(os.open(state_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            self.jail.give(state_path)
            self.qmp.cmd("migrate-set-parameters", **{"max-bandwidth": 1 << 40})
            self.qmp.cmd("migrate", uri=f"exec:cat > {state_path}")
            self._wait(self._migrated, "writing the state")
            self.jail.seal(state_path)
        finally:
            self.qmp.cmd("cont")
        return frozen

    def _migrated(self) -> bool:
        """True once the outgoing migration completed (VmError if it failed)."""
        info = self.qmp.cmd("query-migrate")
        if info.get("status") in ("failed", "cancelled"):
            raise VmError(f"migration {info.get('status')}: {info.get('error-desc', info)}")
        return info.get("status") == "completed"

    def _wait(self, done, what: str, timeout_s: float = 300.0) -> None:
        """Poll done() until true; VmError if QEMU exits or timeout_s passes."""
        deadline = time.monotonic() + timeout_s
        while not done():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise VmError(f"{what}: QEMU {'exited' if self.proc.poll() is not None else 'timed out'}")
            time.sleep(0.01)

    def pid(self) -> int | None:
        """QEMU's host pid."""
        return self.qemu_pid

    def alive(self) -> bool:
        """True while QEMU runs."""
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """Kill QEMU (the guest and everything in it) and wait for it."""
        if self.qmp is not None:
            self.qmp.close()
            self.qmp = None
        if self.qemu_pid is not None:
            try:
                os.kill(self.qemu_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()  # bwrap: its init dies with it (--die-with-parent), and the whole pid namespace
        if self.proc is not None:
            self.proc.wait(timeout=30)
        if self.cgroup_dirs:
            self.jail.cgroups.remove(self.cgroup_dirs, timeout_s=30.0)  # waits for the namespace's last exit
            self.cgroup_dirs = []

    def log_tail(self, size: int = 1500) -> str:
        """The end of QEMU's log and the guest console, for errors."""
        out = []
        for path in (os.path.join(self.workdir, "qemu.log"), self.console):
            try:
                with open(path, "rb") as f:
                    f.seek(max(0, os.path.getsize(path) - size))
                    out.append(f"{os.path.basename(path)}: {f.read().decode(errors='replace').strip() or '(empty)'}")
            except OSError:
                out.append(f"{os.path.basename(path)}: (none)")
        return "; ".join(out)
