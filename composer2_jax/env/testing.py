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
