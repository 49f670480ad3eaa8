"""Helpers for the environment's tests and benchmark: host checks, a loopback upstream server, process probes."""

from __future__ import annotations

import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from composer2_jax.env.runtime import host_problem  # noqa: F401  (tests import it from here)
from composer2_jax.env.workspace import make_repo  # noqa: F401  (tests import it from here)


def pids_in_pidns(pidns: int) -> list[int]:
    """Host pids of every process whose pid namespace has inode `pidns`."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}/ns/pid").st_ino == pidns:
                    pids.append(int(name))
            except OSError:
                continue
    return pids


def count_processes() -> int:
    """Number of processes in the host's process table."""
    return sum(name.isdigit() for name in os.listdir("/proc"))


class _UpstreamHandler(BaseHTTPRequestHandler):
    """GET /anything answers 'hello from upstream <path>'; POST echoes its body."""

    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def _answer(self, body: bytes) -> None:
        self.server.seen.append((self.command, self.path))
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self._answer(f"hello from upstream {self.path}".encode())

    def do_POST(self):
        self._answer(self.rfile.read(int(self.headers.get("Content-Length") or 0)))


class Upstream:
    """An HTTP server on 127.0.0.1 (the only address tests talk to), recording (method, path) it served."""

    def __init__(self):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _UpstreamHandler)
        self.server.seen = []
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def seen(self) -> list[tuple[str, str]]:
        """Requests served so far."""
        return list(self.server.seen)

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


class UdpSink:
    """A UDP socket on 127.0.0.1 that records whether any datagram arrived."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]

    def received(self) -> bool:
        """True if a datagram is waiting."""
        try:
            self.sock.recv(65536)
            return True
        except OSError:
            return False

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


# Run inside a sandbox as `python3 -c`: the chroot escape (chroot into a subfolder, walk `..` out, chroot there) and
# a nested user namespace. Prints one JSON line: what chroot and unshare returned, and what the escaped root holds.
CHROOT_ESCAPE = r'''
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
out = {}
os.makedirs("/tmp/.esc", exist_ok=True)
try:
    os.chroot("/tmp/.esc")
    for _ in range(64):
        os.chdir("..")
    os.chroot(".")
    out["chroot"] = "ok"
except OSError as e:
    out["chroot"] = e.strerror
out["guest_dir"] = os.path.exists("/opt/sandbox-guest/main.py")
out["root"] = sorted(os.listdir("/"))
try:
    out["passwd"] = open("/etc/passwd").read()
except OSError as e:
    out["passwd"] = e.strerror
out["unshare_user"] = "ok" if libc.unshare(0x10000000) == 0 else os.strerror(ctypes.get_errno())
print(json.dumps(out))
'''

# Run inside a sandbox as `python3 -c`: chmod, chown and utime every mount point and bind-mounted file it can name.
METADATA_ATTACK = r'''
import json, os
paths = {"/run/egress.sock", "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}
for line in open("/proc/self/mountinfo"):
    paths.add(line.split()[4].encode().decode("unicode_escape"))
done = []
for p in sorted(paths):
    for name, op in (("chmod", lambda: os.chmod(p, 0o777, follow_symlinks=False)),
                     ("chown", lambda: os.chown(p, 0, 0, follow_symlinks=False)),
                     ("chown", lambda: os.chown(p, 4242, 4242, follow_symlinks=False)),
                     ("utime", lambda: os.utime(p, (1, 1), follow_symlinks=False)),
                     ("touch", lambda: os.utime(p, None, follow_symlinks=False))):
        try:
            op()
            done.append(f"{name} {p}")
        except (OSError, NotImplementedError):
            pass
print(json.dumps(done))
'''


def inode_facts(path: str) -> tuple:
    """(mode, uid, gid, mtime_ns) of a host path, not following a final symlink."""
    st = os.lstat(path)
    return st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns
