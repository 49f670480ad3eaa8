"""Entry point of the sandbox's guest process: pid 1 of the sandbox, serving the host over an inherited socket.

Usage (inside the sandbox, started by bwrap): python3 -I -S main.py RPC_FD PROXY_PORT EGRESS_SOCKET [IMAGE_ROOT]

One selector loop serves three things: request frames from the host (file tools run inline, a command
runs as a `Job` whose pipes join the loop), SIGCHLD wakeups (reaping), and the egress relay.

With IMAGE_ROOT (image sandboxes) the guest is root in its user namespace and the image's root filesystem is
mounted there by the host: commands are chrooted into it, and file tools run with the guest chrooted into it for
the call (`in_image`, which returns through a descriptor of the guest's own root) and as the requested user.
"""

import contextlib
import os
import selectors
import signal
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fileops
import runner
import users
import wire
from relay import Relay

FILE_OPS = ("read_file", "write_file", "edit_file", "list_dir")


class Guest:
    """The sandbox's init: request loop, command jobs, reaper and relay."""

    def __init__(self, rpc_fd, proxy_port, egress_socket, image_root=None):
        os.set_inheritable(rpc_fd, False)
        self.image_root = image_root
        self.outer = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC) if image_root else None
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

    @contextlib.contextmanager
    def in_image(self, user_spec=None):
        """For the block: chrooted into the image (image sandboxes) and acting as the given user."""
        if self.image_root is None:
            yield None
            return
        os.chroot(self.image_root)
        os.chdir("/")
        try:
            user = self._user(user_spec)
            if user.uid != 0 or user.gid != 0:
                os.setgroups(list(user.groups))
                os.setegid(user.gid)
                os.seteuid(user.uid)
            try:
                yield user
            finally:
                os.seteuid(0)
                os.setegid(0)
                os.setgroups([])
        finally:
            os.fchdir(self.outer)
            os.chroot(".")
            os.chdir("/")

    @staticmethod
    def _user(spec):
        """users.resolve with a failure as a ToolError."""
        try:
            return users.resolve(spec)
        except users.UserError as e:
            raise fileops.ToolError("invalid_arguments", str(e)) from None

    def _dispatch(self, req):
        """Run one operation; None when the answer comes later (a started command)."""
        op = req.get("op")
        if op == "exec":
            self._start_job(req)
            return None
        if op == "grep":
            with self.in_image(req.get("user")):
                return fileops.grep(req, req["limits"], runner.set_limits)
        if op in FILE_OPS:
            with self.in_image(req.get("user")):
                return getattr(fileops, op)(req)
        if op == "configure":
            return self._configure(req)
        if op == "spawn":
            return self._spawn(req)
        if op == "put_archive":
            return self._put_archive(req)
        if op == "sweep":
            self.reaper.sweep()
            return {"ok": True, "cpu_s": self.reaper.cpu_s}
        if op == "ping":
            return {"ok": True, "cpu_s": self.reaper.cpu_s}
        raise fileops.ToolError("unknown_op", f"unknown guest operation {op!r}")

    def _configure(self, req):
        """Image sandboxes: set the working directory (created, owned by the user, if asked) relative paths use."""
        if self.image_root is None:
            raise fileops.ToolError("unknown_op", "configure is only for image sandboxes")
        workdir = os.path.normpath("/" + req["workdir"].lstrip("/"))  # never "//x" (normpath keeps it)
        with self.in_image() as _:
            user = self._user(req.get("user"))
            if req.get("create") and not os.path.isdir(workdir):
                os.makedirs(workdir, exist_ok=True)
                os.chown(workdir, user.uid, user.gid)
            if not os.path.isdir(workdir):
                raise fileops.ToolError("not_a_directory", f"working directory {workdir!r} does not exist in the image")
        fileops.configure(workdir, confined=bool(req.get("confined")))  # confined: a VM's /workspace rule
        return {"ok": True, "workdir": workdir}

    def _spawn(self, req):
        """Image sandboxes: start a detached process (an ENTRYPOINT) that outlives every call; its pid."""
        if self.image_root is None:
            raise fileops.ToolError("unknown_op", "spawn is only for image sandboxes")
        with self.in_image() as _:
            user = self._user(req.get("user"))
            cwd = fileops.resolve(req.get("cwd") or ".")
        pid = runner.spawn(req["argv"], req["env"], cwd, req["limits"], self.image_root, user, req["log"])
        return {"ok": True, "pid": pid}

    def _put_archive(self, req):
        """Unpack a base64 tar from the host at dest (any absolute path: the host is trusted; image sandboxes: inside
        the image), owned by the given user. Everything is decoded and imported before the chroot (a gzipped payload is
        decompressed here), so the image's own Python, gzip or zlib play no part; a member that cannot be written is
        named in the error."""
        import base64  # deferred: the guest's start time counts in every sandbox start
        import copy
        import io
        import tarfile

        data = base64.b64decode(req["data"])
        if data[:2] == b"\x1f\x8b":
            import gzip

            data = gzip.decompress(data)
        tf = tarfile.open(fileobj=io.BytesIO(data), mode="r:")
        members = tf.getmembers()
        trusted = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
        with self.in_image() as _:
            user = self._user(req.get("user")) if self.image_root else None
            if not req["dest"].startswith("/"):
                raise fileops.ToolError("invalid_arguments", f"dest {req['dest']!r}; expected an absolute path")
            dest = os.path.normpath(req["dest"])
            os.makedirs(dest, exist_ok=True)
            dirs = []
            for member in members:
                try:
                    if member.isdir():  # written 0700 first, its own mode set last (a read-only dir keeps its files)
                        dirs.append(member)
                        member = copy.copy(member)
                        member.mode = 0o700
                    tf.extract(member, dest, numeric_owner=True, **trusted)
                except (OSError, tarfile.TarError, ValueError) as e:
                    raise fileops.ToolError("put_archive_failed", f"cannot write {member.name} under {dest}: "
                                            f"{type(e).__name__}: {e}") from None
            for member in sorted(dirs, key=lambda m: m.name, reverse=True):
                os.chmod(os.path.join(dest, member.name), member.mode)
            if user is not None:
                for name in [""] + [m.name for m in members]:
                    os.lchown(os.path.join(dest, name), user.uid, user.gid)
        return {"ok": True, "dest": dest, "entries": len(members)}

    def _start_job(self, req):
        """Check cwd and the sandbox CPU budget, then fork the command."""
        with self.in_image() as _:
            user = self._user(req.get("user")) if self.image_root else None
            cwd = fileops.resolve(req.get("cwd") or ".")
            if not os.path.isdir(cwd):
                raise fileops.ToolError("not_a_directory", f"cwd {req.get('cwd')!r} is not a directory")
        env = dict(req["env"])
        if user is not None:
            env.setdefault("HOME", user.home)
        limits = dict(req["limits"])
        left = req["cpu_budget_s"] - self.reaper.cpu_s
        if left <= 0:
            raise fileops.ToolError("cpu_budget_exhausted",
                                    f"the sandbox used {self.reaper.cpu_s:.1f} CPU s of its "
                                    f"{req['cpu_budget_s']} s budget")
        limits["cpu_s"] = left if limits["cpu_s"] is None else min(limits["cpu_s"], left)
        launch = runner.Launch(req["cmd"], cwd, env, limits, self.image_root, user)
        self.job = runner.Job(self.sel, self.reaper, launch, req["timeout_s"])


def main(argv):
    """Parse RPC_FD PROXY_PORT EGRESS_SOCKET [IMAGE_ROOT], make the guest untraceable by its sandbox, and serve."""
    runner.set_dumpable(False)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    rpc_fd, proxy_port, egress_socket = int(argv[1]), int(argv[2]), argv[3]
    Guest(rpc_fd, proxy_port, egress_socket, argv[4] if len(argv) > 4 else None).serve()


if __name__ == "__main__":
    main(sys.argv)
