"""The VMM's confinement: every QEMU process runs unprivileged, without capabilities, in its own namespaces and cgroup.

The guest kernel is the first layer an escape must cross; the QEMU process emulating its devices is the second, so it
is held like a bubblewrap sandbox (env/bwrap.py): setpriv drops it to `SandboxConfig.vm_uid` (uid and gid, no
supplementary groups, no_new_privs), and bwrap puts it in fresh user, pid, mount, net, ipc and uts namespaces with no
capabilities (bwrap keeps none for a non-root uid). Its mount namespace holds the read-only host system dirs, a
private /tmp, /proc and a minimal /dev, and only the VM's own files:

* read-write: its work dir (QMP and RPC sockets, console log; owned by vm_uid) and its sandbox's disk dir (owned by
  root, mode 0755: QEMU cannot create, rename or delete there; it writes only the files `give` handed it, its live
  overlay and a state file being written);
* read-only, one file each: the kernel, initramfs and runtime disk, every backing file of its disk that lies outside
  its disk dir (a snapshot's frozen layers, the image's ext4), the state file it resumes from, the egress pipe script
  and its egress socket.

Everything the host creates for it is made by root beforehand (overlays, state files), then given to vm_uid; once a
snapshot freezes a layer or a state file, `seal` hands it back to root (0644), so no VM can change a snapshot that
other VMs fork from. The network namespace has no interface: the user-mode network reaches the egress proxy only
through the guestfwd command's Unix socket. A cgroup per VM (env/cgroups.py) bounds QEMU's host memory (guest RAM
plus `overhead_mib`) and its tasks; there is no seccomp filter (the repository has none to reuse).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess

from composer2_jax.env.bwrap import system_binds
from composer2_jax.env.cgroups import Cgroups
from composer2_jax.env.sandbox_config import SandboxConfig

EGRESS_PIPE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "egress_pipe.py")
TB_MIB = 256  # TCG's translated-code buffer (-accel tcg,tb-size=): bounded so the memory cgroup can be tight


@dataclasses.dataclass(frozen=True)
class Binds:
    """What one QEMU process sees of the host beyond the system dirs."""

    rw_dirs: tuple[str, ...]  # bound read-write at the same path
    ro_files: tuple[str, ...]  # bound read-only at the same path


class Jail:
    """Builds the confined command line of a QEMU process and owns the files and cgroups it may use."""

    def __init__(self, config: SandboxConfig, state_dir: str, cgroups: Cgroups | None = None,
                 overhead_mib: int = 768):
        self.config, self.cgroups, self.overhead_mib = config, cgroups, overhead_mib
        self.uid = self.gid = config.vm_uid
        self.pipe = os.path.join(state_dir, "egress_pipe.py")  # a copy vm_uid can reach (the repo may not be)
        shutil.copyfile(EGRESS_PIPE, self.pipe)
        os.chmod(self.pipe, 0o644)

    def give(self, path: str, mode: int = 0o600) -> None:
        """Hand a file or dir the host made to the VM's uid (only its owner and root may use it)."""
        os.chown(path, self.uid, self.gid)
        os.chmod(path, mode)

    @staticmethod
    def seal(path: str) -> None:
        """Take a file back from the VM: root's, readable by every VM (a frozen layer or a state file)."""
        os.chown(path, 0, 0)
        os.chmod(path, 0o644)

    def pipe_command(self, egress_socket: str) -> str:
        """The guestfwd command: the sandbox python relaying one guest connection into the egress socket."""
        return f"{self.config.python_path()} {self.pipe} {egress_socket}"

    def argv(self, binds: Binds, qemu: list[str], kvm: bool, info_fd: int, block_fd: int) -> list[str]:
        """setpriv + bwrap + qemu: QEMU as vm_uid in fresh namespaces; bwrap reports its child on info_fd and waits
        on block_fd (the host puts the child in its cgroup in between)."""
        groups = [f"--groups={os.stat('/dev/kvm').st_gid}"] if kvm else ["--clear-groups"]
        drop = [self.config.setpriv_path(), f"--reuid={self.uid}", f"--regid={self.gid}", *groups,
                "--no-new-privs", "--"]
        ns = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
              "--unshare-cgroup-try", "--disable-userns", "--hostname", "vmm", "--die-with-parent", "--new-session"]
        fs = system_binds(self.config) + ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        if kvm:
            fs += ["--dev-bind", "/dev/kvm", "/dev/kvm"]
        for path in binds.rw_dirs:
            fs += ["--bind", path, path]
        for path in binds.ro_files:
            fs += ["--ro-bind", path, path]
        env = ["--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8", "--chdir", "/"]
        return [*drop, self.config.bwrap_path(), *ns, *fs, *env, "--info-fd", str(info_fd), "--block-fd",
                str(block_fd), "--", *qemu]

    def cgroup(self, name: str, memory_mib: int) -> list[str]:
        """A cgroup for one QEMU process: guest RAM + overhead_mib of host memory, 256 tasks (empty: none here)."""
        if self.cgroups is None or not self.cgroups.available:
            return []
        return self.cgroups.create(name, (memory_mib + self.overhead_mib) << 20, 256)


def backing_chain(disk: str) -> list[str]:
    """Every file of a disk's backing chain, the disk first (qemu-img info --backing-chain)."""
    proc = subprocess.run(["qemu-img", "info", "-U", "--backing-chain", "--output=json", disk],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise OSError(f"qemu-img info {disk} failed: {proc.stderr.strip()}")
    info = json.loads(proc.stdout)
    return [entry["filename"] for entry in (info if isinstance(info, list) else [info])]
