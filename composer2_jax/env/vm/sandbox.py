"""One VM sandbox: a QEMU guest running the guest process (env/guest), with the `request` interface of env/sandbox.py.

Its state is a `VmSnapshot`: the guest's memory and device state (None for an image that was never booted) and the
disk it stood on. `boot` starts a guest cold (the image's entrypoint is then started by the Environment, as for a
bubblewrap sandbox); `resume` starts one from a memory snapshot: every process of the guest goes on where it was,
so nothing is restarted. Each VM writes to its own qcow2 overlay on the snapshot's (read-only from then on) disk.
Its QEMU runs confined (env/vm/jail.py); its overlays and state files live in its own disk dir (root's, 0755).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time

from composer2_jax.env.egress_policy import EgressPolicy
from composer2_jax.env.guest import wire
from composer2_jax.env.sandbox import GuestChannel, SandboxError
from composer2_jax.env.vm.jail import Jail
from composer2_jax.env.vm.vmm import QemuVM, VmError, VmSpec, new_overlay

EGRESS_PORT = 3128  # the port of vm.egress= on the guest's kernel command line (vmm.QemuVM.argv)


@dataclasses.dataclass(frozen=True)
class VmSnapshot:
    """A state to start VMs from: memory + devices (a QEMU migration file, or None: boot cold) and a disk."""

    disk: str  # the frozen disk (a qcow2 overlay chain, or an image's raw ext4)
    disk_format: str  # "qcow2" or "raw"
    spec: VmSpec  # the machine the state belongs to (a resume must use the same)
    network: bool  # whether the machine has the (egress-only) network device
    state: str | None = None  # QEMU's migration stream of memory and devices; None: a cold boot


class VmSandbox(GuestChannel):
    """Handle on one running VM; `request` talks to its guest process over the virtio-serial port."""

    GUEST = "the VM's guest process"
    # An emulated guest (TCG) under a root fork bomb kills and reaps thousands of processes on a CPU ~10× slower than
    # the host's: 60 s past the command's timeout was not always enough on a loaded 2-core host (2026-12-07, the
    # fork-bomb check answered "stopped answering" instead of "timeout"), so the VM's guest gets longer to answer.
    REPLY_GRACE_S = 240.0

    def __init__(self, sid: str, policy: EgressPolicy, workdir: str, disk_dir: str, egress_socket: str, jail: Jail):
        self.sid, self.policy, self.workdir, self.egress_socket = sid, policy, workdir, egress_socket
        self.jail = jail
        self.disk_dir = disk_dir  # its own overlays and state files: they outlive it when a snapshot stands on them
        for path in (workdir, disk_dir):
            os.makedirs(path, exist_ok=True)
            os.chmod(path, 0o755)  # root's: its QEMU may enter, not create, rename or delete (jail.py)
        self.lock = threading.RLock()
        self.dead: str | None = None
        self.vm: QemuVM | None = None
        self.rpc = None
        self.cgroup_dirs: list[str] = []  # the guest's RAM bounds it; QEMU's own cgroup is vm.cgroup_dirs (jail.py)
        self.chain = None
        self.pidns = None
        self.spec: VmSpec | None = None
        self.network = False
        self.net = None  # no shared service network (env/netns.py) for VMs
        self._n = 0

    @property
    def proxy_port(self) -> int:
        """The guest process's egress relay port (guest_init passes vm.egress=3128 when the VM has a network)."""
        return EGRESS_PORT

    @property
    def pid(self) -> int | None:
        """Host pid of the VM's QEMU process."""
        return self.vm.pid() if self.vm else None

    def _disk_path(self) -> str:
        """A fresh overlay path in the sandbox's directory."""
        self._n += 1
        return os.path.join(self.disk_dir, f"{self.sid}-{self._n}.qcow2")

    def start(self, snap: VmSnapshot, spec: VmSpec) -> None:
        """Boot (no state: cold, with `spec`) or resume (the snapshot's own spec) on a new overlay of snap.disk."""
        if self.vm is not None:
            self.stop()
        disk = self._disk_path()
        new_overlay(disk, snap.disk, snap.disk_format)
        self.jail.give(disk)
        self.spec = snap.spec if snap.state else spec
        self.network = snap.network if snap.state else bool(self.policy.allow_hosts)
        if snap.state and bool(self.policy.allow_hosts) and not snap.network:
            raise SandboxError(f"sandbox {self.sid}: its egress policy allows hosts, but the memory snapshot it "
                               "resumes is of a VM without a network device (start it from an image instead)")
        vm = QemuVM(self.spec, os.path.join(self.workdir, f"vm{self._n}"), disk, self.jail, snap.state,
                    self.egress_socket if self.network else None)
        self.vm, self.dead = vm, None
        started = time.monotonic()
        try:
            vm.start()
            self.rpc = vm.connect_rpc()
            if snap.state is None:
                self.rpc.settimeout(self.spec.boot_timeout_s)
                hello = wire.recv(self.rpc)
                if not hello or not hello.get("ok"):
                    raise VmError(f"the VM's guest process said {hello!r} instead of hello")
            else:
                self.request("ping_vm", wait_s=60)  # any answer (an unknown op's error included) proves it runs
        except (OSError, ValueError, VmError, SandboxError) as e:
            log = vm.log_tail()
            self.stop()
            self.dead = f"its VM failed to start: {e}"
            raise SandboxError(f"VM sandbox {self.sid} failed to start after {time.monotonic() - started:.1f} s: "
                               f"{e}; {log}") from None

    def snapshot(self, state_path: str) -> VmSnapshot:
        """Memory, devices and disk as they are now; the VM runs on (on a fresh overlay)."""
        frozen = self.vm.snapshot(state_path, self._disk_path())
        return VmSnapshot(frozen, "qcow2", self.spec, self.network, state_path)

    def alive(self) -> bool:
        """True while the VM runs and its guest process answers."""
        return self.dead is None and self.vm is not None and self.vm.alive()

    def stop(self) -> None:
        """Kill the VM (its whole guest)."""
        if self.rpc is not None:
            self.rpc.close()
            self.rpc = None
        if self.vm is not None:
            self.vm.kill()
            self.vm = None

    def close(self) -> None:
        """Kill the VM; the sandbox is unusable afterwards."""
        self.dead = self.dead or "closed"
        self.stop()
