"""Entry point of the sandbox agent: pid 1 of the sandbox, serving the host's requests over an inherited socket.

Usage (inside the sandbox, started by bwrap): python3 -I -S main.py RPC_FD PROXY_PORT EGRESS_SOCKET

One selector loop serves three things: request frames from the host (file tools run inline, a command
runs as a `Job` whose pipes join the loop), SIGCHLD wakeups (reaping), and the egress relay.
"""

import os
import selectors
import signal
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fileops
import runner
import wire
from relay import Relay


class Agent:
    """The sandbox's init: request loop, command jobs, reaper and relay."""

    def __init__(self, rpc_fd, proxy_port, egress_socket):
        os.set_inheritable(rpc_fd, False)
        self.rpc = socket.socket(fileno=rpc_fd)
        self.sel = selectors.DefaultSelector()
        self.reaper = runner.Reaper(self.sel)
        self.relay = Relay(self.sel, proxy_port, egress_socket) if proxy_port else None
        self.job = None
        self.sel.register(self.rpc, selectors.EVENT_READ, self._on_request)

    def serve(self):
        """Say hello, then loop until the host hangs up."""
        wire.send(self.rpc, {"ok": True, "pid": os.getpid()})
        while True:
            timeout = self.job.time_left() if self.job else None
            for key, mask in self.sel.select(timeout):
                key.data(key.fileobj, mask)
            if self.job:
                self.job.poll()
                if self.job.done:
                    job, self.job = self.job, None
                    wire.send(self.rpc, job.result())

    def _on_request(self, sock, mask):
        """Read one request frame and answer it (commands answer when they finish)."""
        req = wire.recv(sock)
        if req is None:
            self.reaper.sweep()
            os._exit(0)
        if self.job:
            wire.send(sock, {"ok": False, "error": "busy", "message": "a command is still running"})
            return
        try:
            reply = self._dispatch(req)
        except fileops.ToolError as e:
            reply = {"ok": False, "error": e.kind, "message": str(e)}
        except Exception as e:  # noqa: BLE001 - the host must always get an answer
            reply = {"ok": False, "error": "internal_error", "message": f"{type(e).__name__}: {e}"}
        if reply is not None:
            wire.send(sock, reply)

    def _dispatch(self, req):
        """Run one operation; None when the answer comes later (a started command)."""
        op = req.get("op")
        if op == "exec":
            self._start_job(req)
            return None
        if op == "grep":
            return fileops.grep(req, req["limits"], runner.set_limits)
        if op in ("read_file", "write_file", "edit_file", "list_dir"):
            return getattr(fileops, op)(req)
        if op == "sweep":
            self.reaper.sweep()
            return {"ok": True, "cpu_s": self.reaper.cpu_s}
        if op == "ping":
            return {"ok": True, "cpu_s": self.reaper.cpu_s}
        raise fileops.ToolError("unknown_op", f"unknown agent operation {op!r}")

    def _start_job(self, req):
        """Check cwd and the sandbox CPU budget, then fork the command."""
        cwd = fileops.resolve(req.get("cwd") or ".")
        if not os.path.isdir(cwd):
            raise fileops.ToolError("not_a_directory", f"cwd {req.get('cwd')!r} is not a directory")
        limits = dict(req["limits"])
        left = req["cpu_budget_s"] - self.reaper.cpu_s
        if left <= 0:
            raise fileops.ToolError("cpu_budget_exhausted",
                                    f"the sandbox used {self.reaper.cpu_s:.1f} CPU s of its {req['cpu_budget_s']} s budget")
        limits["cpu_s"] = min(limits["cpu_s"], left)
        self.job = runner.Job(self.sel, self.reaper, req["cmd"], cwd, req["env"], req["timeout_s"], limits)


def main(argv):
    """Parse RPC_FD PROXY_PORT EGRESS_SOCKET, make the agent untraceable by its own sandbox, and serve."""
    runner.set_dumpable(False)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    rpc_fd, proxy_port, egress_socket = int(argv[1]), int(argv[2]), argv[3]
    Agent(rpc_fd, proxy_port, egress_socket).serve()


if __name__ == "__main__":
    main(sys.argv)
