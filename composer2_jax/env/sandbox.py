"""One sandbox: a bubblewrap process tree in fresh user, pid, mount, ipc, uts and network namespaces.

The tree's pid 1 is the sandbox's guest process (guest/main.py), which serves requests over a socketpair. The system is
bound read-only, the root and /dev are remounted read-only, /tmp and /dev/shm are size-limited tmpfs, and
/workspace is an overlay whose lower layers come from the layer store and whose upper layer lives on a
size-limited tmpfs (mounted into the sandbox's namespace by the mount helper). The sandbox user maps to
an unprivileged host uid and has no capabilities. Closing SIGKILLs pid 1 through a pidfd: the kernel then
kills every process of the pid namespace, and bwrap's exit confirms they are all gone.

An image sandbox (`image=True`) differs in three ways: its user namespace maps 65536 ids (0 = host
image_uid_base), written by this process while bwrap waits on a pipe; root inside has Docker's default
capabilities there; and the mount helper mounts a whole root filesystem (the image's layers under the
sandbox's own upper layer) at IMAGE_ROOT, into which the guest chroots every command.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import threading
import time

from composer2_jax.env.bwrap import DEV_NODES, bwrap_argv, image_bwrap_argv
from composer2_jax.env.egress_policy import EgressPolicy
from composer2_jax.env.guest import wire
from composer2_jax.env.layers import Chain
from composer2_jax.env.runtime import Runtime


class SandboxError(RuntimeError):
    """The sandbox failed to start, died, or stopped answering."""


class GuestChannel:
    """The request side of a sandbox's guest connection, shared by bubblewrap and VM sandboxes.

    A subclass holds `sid`, `lock`, `rpc` (the guest's socket) and `dead` (None, or why it stopped answering); the
    first failed exchange marks it dead, and every later request raises at once.
    """

    GUEST = "the guest"  # how errors name the other end
    # How long past a command's own timeout the host waits for the guest's reply (the guest kills and reaps the
    # command at its timeout, then answers) before it counts the sandbox dead.
    REPLY_GRACE_S = 60.0

    def request(self, op: str, wait_s: float = 30.0, **fields) -> dict:
        """Send one operation to the guest and wait up to wait_s for its reply."""
        with self.lock:
            if self.dead:
                raise SandboxError(f"sandbox {self.sid} is not usable: {self.dead}")
            try:
                self.rpc.settimeout(wait_s)
                wire.send(self.rpc, {"op": op, **fields})
                reply = wire.recv(self.rpc)
            except (OSError, ValueError) as e:
                reply, why = None, f"{type(e).__name__}: {e}"
            else:
                why = f"{self.GUEST} exited"
            if reply is None:
                self.dead = f"{op} failed: {why}"
                raise SandboxError(f"sandbox {self.sid} stopped answering during {op}: {why}")
            return reply

    def sweep(self) -> None:
        """Kill every process in the sandbox except the guest."""
        self.request("sweep")


class Sandbox(GuestChannel):
    """Handle on one running sandbox; `request` talks to its guest, `mount` (re)builds its workspace."""

    def __init__(self, runtime: Runtime, sid: str, policy: EgressPolicy, image: bool = False, net=None):
        self.rt, self.sid, self.policy, self.image = runtime, sid, policy, image
        self.net = net  # a netns.SharedNet this image sandbox joins (None: a network namespace of its own)
        self.proxy_port = net.port() if net is not None else runtime.config.proxy_port  # its egress relay's port
        self.lock = threading.RLock()  # one request at a time
        self.chain: Chain | None = None
        self.pid = self.pidns = self.pidfd = None
        self.cgroup_dirs: list[str] = []
        self.dead: str | None = None  # why the sandbox is unusable, once it is
        self.proc: subprocess.Popen | None = None
        self.rpc: socket.socket | None = None

    # ---------------------------------------------------------------------------------------------- lifecycle

    def start(self) -> Sandbox:
        """Spawn bwrap and wait for the guest's hello (runs on the runtime's spawner thread)."""
        cfg = self.rt.config
        sock_path = os.path.join(self.rt.egress_dir, f"{self.sid}.sock")
        log_path = os.path.join(self.rt.log_dir, f"{self.sid}.log")
        owner = (cfg.image_uid_base,) * 2 if self.image else (cfg.host_uid, cfg.host_gid)
        try:
            self.rt.proxy.add(self.sid, sock_path, self.policy, *owner)
            info = self._spawn(sock_path, log_path)
            self.pid, self.pidns = info["child-pid"], info.get("pid-namespace")
            self.pidfd = os.pidfd_open(self.pid)
            self.rpc.settimeout(cfg.spawn_timeout_s)
            hello = wire.recv(self.rpc)
            if not hello or not hello.get("ok"):
                raise SandboxError(f"the guest said {hello!r} instead of hello")
            self._confine()
        except (OSError, ValueError, SandboxError) as e:
            self.close()
            raise SandboxError(f"sandbox {self.sid} failed to start: {e}; log: {_tail(log_path)}") from None
        return self

    def _spawn(self, sock_path: str, log_path: str) -> dict:
        """Start bwrap with the guest's end of a socketpair; bwrap's --info-fd report."""
        cfg, lim = self.rt.config, self.rt.limits
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.rpc = ours
        info_r, info_w = os.pipe()
        block_r, block_w = os.pipe() if self.image else (-1, -1)
        try:
            if self.image:
                net = (self.net.path, self.proxy_port) if self.net is not None else None
                argv = image_bwrap_argv(cfg, lim, self.rt.guest_dir, sock_path, theirs.fileno(), info_w, block_r,
                                        net)
            else:
                argv = bwrap_argv(cfg, lim, self.rt.guest_dir, sock_path, theirs.fileno(), info_w)
            fds = (theirs.fileno(), info_w) + ((block_r,) if self.image else ())
            with open(log_path, "wb") as log:
                self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                             pass_fds=fds)  # ids dropped by setpriv
            os.close(info_w)
            info_w = -1
            info = _read_info(info_r, cfg.spawn_timeout_s)
            if self.image:
                self._map_ids(info["child-pid"])
                os.write(block_w, b"1")
            return info
        finally:
            theirs.close()
            for fd in (info_r, info_w, block_r, block_w):
                if fd >= 0:
                    os.close(fd)

    def _map_ids(self, pid: int) -> None:
        """Write the image sandbox's uid and gid maps: ids 0..65535 inside are image_uid_base.. on the host."""
        base = self.rt.config.image_uid_base
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{pid}/{name}", "w") as f:
                f.write(f"0 {base} 65536\n")

    def _confine(self) -> None:
        """Seal the sandbox (its /dev's host nodes read-only; nested user namespaces refused in an image sandbox, where
        root could regain chroot in one; workspace sandboxes have bwrap's --disable-userns), then put the guest (and
        so every later process) in the sandbox's cgroup."""
        lim = self.rt.limits
        self.rt.mountd.request("seal", pid=self.pid, dev_nodes=list(DEV_NODES),
                               deny_userns=self.image and not self.rt.config.image_nested_userns)
        if self.rt.cgroups.available:
            self.cgroup_dirs = self.rt.cgroups.create(self.sid, lim.sandbox_memory_bytes, lim.processes + 16)
            self.rt.cgroups.attach(self.cgroup_dirs, self.pid)

    def mount(self, chain: Chain, size_bytes: int | None = None) -> None:
        """Give the sandbox a fresh, empty upper layer over `chain` (processes must be swept first).

        A workspace sandbox gets /workspace; an image sandbox its whole root filesystem (see mountd.mount_root).
        """
        lim, cfg = self.rt.limits, self.rt.config
        size = size_bytes or lim.disk_bytes
        if self.image:
            base = cfg.image_uid_base
            roots, index = self.rt.image_dirs(chain)
            self.rt.mountd.request("mount_root", pid=self.pid, layers_dir=self.rt.layers.root, image_dirs=roots,
                                   image_index=index, chain=list(chain), uid=base, gid=base, size_bytes=size,
                                   hostname=cfg.hostname, aliases=list(self.net.aliases if self.net else ()))
        else:
            self.rt.mountd.mount_workspace(self.pid, self.rt.layers.root, chain, cfg.host_uid, cfg.host_gid, size)
        self.chain = tuple(chain)

    def upper_dir(self) -> str:
        """Host path of the sandbox's upper layer (through its root in /proc)."""
        return f"/proc/{self.pid}/root/.sbx/upper"

    def close(self) -> None:
        """Kill the whole process tree, wait for it, and release the socket, cgroups and egress route."""
        self.dead = self.dead or "closed"
        if self.pidfd is not None:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            if self.pidfd is None and self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=30)
        if self.rpc is not None:
            self.rpc.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        self.rt.cgroups.remove(self.cgroup_dirs)
        self.cgroup_dirs = []
        self.rt.proxy.remove(self.sid)

    # ---------------------------------------------------------------------------------------------- requests

    def alive(self) -> bool:
        """True while the guest runs and answers."""
        return self.dead is None and self.proc is not None and self.proc.poll() is None


def _read_info(fd: int, timeout_s: float) -> dict:
    """Read bwrap's --info-fd JSON (child pid, namespace ids)."""
    deadline, data = time.monotonic() + timeout_s, b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise SandboxError(f"bwrap wrote no info within {timeout_s} s")
        chunk = os.read(fd, 4096)
        if not chunk:
            raise SandboxError("bwrap exited before reporting its child")
        data += chunk
        try:
            return json.loads(data)
        except ValueError:
            continue


def _tail(path: str, size: int = 2000) -> str:
    """Last bytes of a log file, for error messages."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - size))
            return f.read().decode(errors="replace").strip() or "(empty)"
    except OSError:
        return "(no log)"
