"""Configuration of the sandbox environment: resource limits and host-side settings."""

from __future__ import annotations

import dataclasses
import os
import shutil

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
# Docker's default capability set: what root in an image sandbox may do (inside its own user namespace only).
DOCKER_CAPS = ("CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID",
               "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL",
               "CAP_AUDIT_WRITE")


@dataclasses.dataclass(frozen=True)
class SandboxLimits:
    """Resource limits; 'per command' ones are rlimits of each command, 'per sandbox' ones bound the whole tree."""

    timeout_s: float = 60.0  # per command: default wall-clock limit of run_terminal_cmd
    max_timeout_s: float = 600.0  # per command: the largest timeout a tool call may ask for
    cpu_s: int = 300  # per command: RLIMIT_CPU of each process (SIGXCPU, then SIGKILL a second later)
    memory_bytes: int = 4 * GiB  # per command: RLIMIT_AS of each process
    file_size_bytes: int = 1 * GiB  # per command: RLIMIT_FSIZE, the largest file a process may write
    open_files: int = 1024  # per command: RLIMIT_NOFILE
    output_bytes: int = 32 * KiB  # per command: stdout and stderr each keep this much (head + tail), rest marked
    output_kill_bytes: int = 64 * MiB  # per command: a command printing more than this in all is killed
    processes: int = 256  # per sandbox: RLIMIT_NPROC, counted per user namespace, i.e. per sandbox
    disk_bytes: int = 1 * GiB  # per sandbox: size of the tmpfs holding the workspace's writable layer
    tmp_bytes: int = 256 * MiB  # per sandbox: size of each of /tmp and /dev/shm
    sandbox_memory_bytes: int = 8 * GiB  # per sandbox: cgroup memory limit (when the host offers cgroups)
    sandbox_cpu_s: float = 3600.0  # per sandbox: CPU seconds all commands may use, checked before each command
    lineage_disk_factor: float = 4.0  # per lineage: default disk budget of its snapshot layers = this x storage limit
    read_bytes: int = 256 * KiB  # per tool call: most bytes read_file returns
    list_entries: int = 1000  # per tool call: most entries list_dir returns
    grep_results: int = 200  # per tool call: most matches grep returns
    grep_file_bytes: int = 4 * MiB  # per tool call: grep skips larger files
    grep_timeout_s: float = 20.0  # per tool call: wall-clock limit of grep

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"SandboxLimits.{field.name}={value!r}; expected a positive number")
        if self.output_bytes < 2:
            raise ValueError(f"SandboxLimits.output_bytes={self.output_bytes}; expected at least 2")

    def command_rlimits(self) -> dict:
        """The per-command limits the sandbox's guest process applies, as a JSON-ready dict."""
        keys = ("cpu_s", "memory_bytes", "processes", "file_size_bytes", "open_files", "output_bytes",
                "output_kill_bytes")
        return {k: getattr(self, k) for k in keys}


@dataclasses.dataclass(frozen=True)
class SandboxConfig:
    """Host-side settings: where state lives, which host ids sandboxes run as, what is bound read-only."""

    base_dir: str | None = None  # sandbox state (layers, logs; root-only); None: a fresh temporary dir
    # parent of the small dir bwrap must reach (guest scripts, egress sockets); None: $TMPDIR
    public_dir: str | None = None
    host_uid: int = 100_000  # host uid the sandbox user maps to (never 0: rlimits must bind)
    host_gid: int = 100_000  # host gid the sandbox group maps to
    sandbox_uid: int = 1000  # uid seen inside the sandbox
    sandbox_gid: int = 1000  # gid seen inside the sandbox
    python: str = "/usr/bin/python3"  # interpreter of the guest (env/guest; stdlib only); must be under a bound dir
    system_dirs: tuple[str, ...] = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")  # ro
    extra_ro_binds: tuple[str, ...] = ()  # more host paths bound read-only at the same place (e.g. a toolchain)
    proxy_port: int = 3128  # port of the egress bridge on the sandbox's loopback
    hostname: str = "sandbox"  # hostname inside the sandbox
    env: tuple[tuple[str, str], ...] = ()  # extra environment variables for commands
    bwrap: str = "bwrap"  # the bubblewrap binary
    setpriv: str = "setpriv"  # util-linux setpriv: drops bwrap to host_uid/host_gid after exec (see bwrap_argv)
    spawn_timeout_s: float = 20.0  # how long a sandbox may take to start
    max_layers: int = 64  # a snapshot chain deeper than this is squashed into one layer
    pool_size: int = 0  # sandboxes kept started in advance so create/fork skip namespace setup
    image_pool_size: int | None = None  # started image sandboxes kept in advance (None: pool_size, once used)
    image_uid_base: int = 200_000  # host uid (and gid) of uid 0 in image sandboxes; they own the 65536 ids above it
    image_caps: tuple[str, ...] = DOCKER_CAPS  # capabilities of root in image sandboxes (in its user namespace)
    image_nested_userns: bool = False  # image sandboxes: allow nested user namespaces (only for tasks that ask)
    backend: str = "bwrap"  # "bwrap": namespaces on the host kernel; "vm": every sandbox a VM (env/vm, docs/env.md)
    vmm: str = "auto"  # vm backend: "auto" (qemu with KVM where it works, else TCG), "qemu-kvm" or "qemu-tcg"
    vm_memory_mib: int = 512  # vm backend: guest RAM of a cold-booted VM (Resources.memory_bytes overrides it)
    vm_cpus: int = 1  # vm backend: vCPUs per VM
    vm_boot_timeout_s: float = 180.0  # vm backend: how long a cold boot may take to answer (TCG on a busy host)
    vm_uid: int = 300_000  # vm backend: host uid and gid every QEMU process runs as (env/vm/jail.py; never 0)

    def __post_init__(self):
        if self.host_uid == 0 or self.host_gid == 0:
            raise ValueError(f"host_uid={self.host_uid}, host_gid={self.host_gid}; expected non-root ids "
                             "(the kernel does not apply RLIMIT_NPROC to host root)")
        if self.image_uid_base <= 0 or self.image_uid_base <= self.host_uid < self.image_uid_base + 65536:
            raise ValueError(f"image_uid_base={self.image_uid_base}; expected a positive host uid whose 65536 ids "
                             f"do not include host_uid={self.host_uid}")
        if self.vm_uid <= 0 or self.vm_uid == self.host_uid or \
                self.image_uid_base <= self.vm_uid < self.image_uid_base + 65536:
            raise ValueError(f"vm_uid={self.vm_uid}; expected a positive host uid other than host_uid={self.host_uid} "
                             f"and outside the image sandboxes' ids {self.image_uid_base}..+65535")
        if self.base_dir is not None and any(c in self.base_dir for c in ":,"):
            raise ValueError(f"base_dir={self.base_dir!r} contains ':' or ','; overlay options cannot name it")
        if not 0 < self.proxy_port < 65536:
            raise ValueError(f"proxy_port={self.proxy_port}; expected 1..65535")
        if self.backend not in ("bwrap", "vm"):
            raise ValueError(f"backend={self.backend!r}; expected 'bwrap' or 'vm'")
        if self.vm_memory_mib < 128 or self.vm_cpus < 1 or self.vm_boot_timeout_s <= 0:
            raise ValueError(f"vm_memory_mib={self.vm_memory_mib}, vm_cpus={self.vm_cpus}, vm_boot_timeout_s="
                             f"{self.vm_boot_timeout_s}; expected >= 128, >= 1 and > 0")
        if self.max_layers < 2 or self.pool_size < 0 or (self.image_pool_size or 0) < 0:
            raise ValueError(f"max_layers={self.max_layers}, pool_size={self.pool_size}, image_pool_size="
                             f"{self.image_pool_size}; expected >= 2, >= 0 and >= 0")

    def bwrap_path(self) -> str:
        """Absolute path of bwrap, or a clear error if it is not installed."""
        return _which("bubblewrap", self.bwrap, "bubblewrap")

    def setpriv_path(self) -> str:
        """Absolute path of setpriv, or a clear error if it is not installed."""
        return _which("setpriv", self.setpriv, "util-linux")

    def python_path(self) -> str:
        """The guest interpreter, checked to exist and to live under a read-only bound directory."""
        real = os.path.realpath(self.python)
        if not os.access(real, os.X_OK):
            raise FileNotFoundError(f"sandbox python {self.python!r} is not an executable; set SandboxConfig.python")
        roots = self.system_dirs + self.extra_ro_binds
        if not any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots):
            raise ValueError(f"sandbox python {real!r} is not under a bound directory {roots}; "
                             "add its prefix to SandboxConfig.extra_ro_binds")
        return self.python


def _which(what: str, binary: str, package: str) -> str:
    """Absolute path of a host binary, or FileNotFoundError naming it and the Debian package to install."""
    path = shutil.which(binary)
    if path is None:
        raise FileNotFoundError(f"{what} binary {binary!r} not found on PATH; install it "
                                f"(Debian: apt-get install -y {package})")
    return path


@dataclasses.dataclass(frozen=True)
class Resources:
    """Per-sandbox resources (Harbor's [environment] cpus / memory_mb / storage_mb); None keeps the Environment's."""

    cpus: float | None = None  # CPU bandwidth in cores (cgroup cpu quota); None: not limited
    memory_bytes: int | None = None  # memory cgroup limit; None: SandboxLimits.sandbox_memory_bytes
    storage_bytes: int | None = None  # size of the tmpfs holding the sandbox's writable layer; None: disk_bytes
    disk_budget_bytes: int | None = None  # layers its lineage's snapshots may add (env/budget.py); None: the
    # storage limit x SandboxLimits.lineage_disk_factor

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise ValueError(f"Resources.{field.name}={value!r}; expected a positive number or None")
