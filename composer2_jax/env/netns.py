"""A private network namespace that several image sandboxes join: a multi-container task's network.

Docker Compose puts a task's services on a private bridge where each reaches the others by service name. Here the
services of one task share one network namespace instead (Kubernetes' pod model): the namespace is made by the host
(root) with `unshare --net`, held open by a small holder process, and has loopback only, so nothing outside the
namespace can be reached except through each sandbox's egress relay. Every sandbox of the task is started inside it
(`nsenter --net=...` before bubblewrap, which then skips --unshare-net), and every service name (and alias) is an
/etc/hosts name for 127.0.0.1 in every sandbox: `curl http://app:8000` from the main service reaches the `app`
service's listener. Two services cannot listen on the same port (one loopback); each sandbox's egress relay gets a
port of its own (`port()`), so their proxy variables differ.

The namespace belongs to the host's user namespace, so root inside a sandbox has no CAP_NET_BIND_SERVICE over it;
the holder sets net.ipv4.ip_unprivileged_port_start = 0 in it, as Docker does in containers, so services bind ports
below 1024.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
import threading

# runs as root inside the new namespace: loopback up, low ports for everyone, then wait for the host to hang up
_HOLDER = (
    "import subprocess, sys\n"
    "subprocess.run([sys.argv[1], 'link', 'set', 'lo', 'up'], check=True)\n"
    "open('/proc/sys/net/ipv4/ip_unprivileged_port_start', 'w').write('0')\n"
    "print('ready', flush=True)\n"
    "sys.stdin.read()\n")


class NetnsError(RuntimeError):
    """The shared network namespace could not be made."""


class SharedNet:
    """One network namespace (held by a holder process) with the host names its sandboxes resolve to 127.0.0.1."""

    def __init__(self, aliases: tuple[str, ...] = (), first_port: int = 3128):
        ip = shutil.which("ip") or shutil.which("ip", path="/usr/sbin:/sbin")
        unshare = shutil.which("unshare")
        if ip is None or unshare is None:
            raise NetnsError(f"a shared network needs `ip` (found {ip}) and `unshare` (found {unshare}) on the host")
        self.aliases = tuple(aliases)
        self._ports = itertools.count(first_port)
        self._lock = threading.Lock()
        self.proc = subprocess.Popen([unshare, "--net", "--", sys.executable, "-I", "-S", "-c", _HOLDER, ip],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.proc.stdout.readline()
        if line.strip() != b"ready":
            self.proc.kill()
            err = self.proc.communicate(timeout=30)[1].decode(errors="replace")
            raise NetnsError(f"the network namespace holder did not start: {line!r} {err[-500:]}")
        self.path = f"/proc/{self.proc.pid}/ns/net"

    def port(self) -> int:
        """A loopback port for the next sandbox's egress relay (distinct within this namespace)."""
        with self._lock:
            return next(self._ports)

    def close(self) -> None:
        """Let the holder exit (the namespace goes once its last sandbox is gone too); idempotent."""
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdout, self.proc.stderr):
            f.close()
