"""Commands inside the sandbox: fork/exec under rlimits, bounded output capture, reaping and the sweep.

The guest is pid 1 of the sandbox's pid namespace and single-threaded, so a plain fork/exec is safe and
`kill(-1, SIGKILL)` from it reaches every other process of the sandbox and nothing outside. In a workspace
sandbox a command never outlives its call: when its shell exits, times out or floods its output, everything
it left behind is killed and reaped (the sweep).

In an image sandbox the machine behaves like a container: a command runs chrooted into the image's root as
its user (`users.resolve`) under bash, and what it starts in the background (`nohup server &`) keeps
running after the call returns. The call ends when the shell exits; pipes that background processes still
hold are read for GRACE_S more and then handed to a `Drain` that discards their output until they close.
A timeout or an output flood kills the command's process group only.
"""

import collections
import ctypes
import os
import resource
import selectors
import signal
import time

SHELL = "/bin/sh"
IMAGE_SHELL = "/bin/bash"  # Harbor runs commands with `bash -c`; /bin/sh when an image has no bash
CHUNK = 1 << 16
GRACE_S = 0.1  # image sandboxes: how long output is still collected after the shell exits
PR_SET_DUMPABLE = 4
# What a command runs and where: the shell command, its working directory, environment and rlimits (`set_limits`),
# and for image sandboxes the image root it is chrooted into and the `users.User` it runs as (None, None: neither).
Launch = collections.namedtuple("Launch", "cmd cwd env limits root user", defaults=(None, None))
_LIBC = ctypes.CDLL(None, use_errno=True)
_RESET_SIGNALS = ("SIGPIPE", "SIGXFSZ", "SIGXCPU", "SIGINT", "SIGTERM", "SIGHUP", "SIGCHLD", "SIGQUIT")


class Capture:
    """Keeps the head and the tail of a byte stream (limit bytes in all) and counts every byte."""

    def __init__(self, limit):
        self.limit, self.total = limit, 0
        self.head, self.tail = bytearray(), bytearray()

    def add(self, data):
        """Append a chunk, keeping at most limit // 2 bytes of head and the rest as a sliding tail."""
        self.total += len(data)
        room = self.limit // 2 - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        keep = self.limit - self.limit // 2
        if len(self.tail) > 2 * keep:
            del self.tail[: len(self.tail) - keep]

    def result(self):
        """(head, tail) as latin-1 text; tail is empty when nothing was dropped."""
        keep = self.limit - self.limit // 2
        tail = bytes(self.tail[-keep:]) if keep else b""
        if self.total <= self.limit:
            return (bytes(self.head) + tail).decode("latin-1"), ""
        return bytes(self.head).decode("latin-1"), tail.decode("latin-1")


class Reaper:
    """Collects every exited child (SIGCHLD wakes the selector) and the CPU they used."""

    def __init__(self, sel):
        self.cpu_s, self.exits = 0.0, {}
        self._r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        sel.register(self._r, selectors.EVENT_READ, self._wake)

    def _wake(self, fd, mask):
        """Drain the wakeup pipe, then reap."""
        try:
            while os.read(fd, 4096):
                pass
        except BlockingIOError:
            pass
        self.reap()

    def reap(self):
        """Collect exited children without blocking; True while some child may still exist."""
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            self.cpu_s += usage.ru_utime + usage.ru_stime
            self.exits[pid] = (status, usage.ru_utime + usage.ru_stime)

    def sweep(self, patience_s=10.0):
        """Kill every process of the sandbox except this one and reap them all (giving up after patience_s)."""
        deadline = time.monotonic() + patience_s
        while time.monotonic() < deadline:
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                break
            if not self.reap():
                break
            time.sleep(0.001)
        self.reap()


def set_dumpable(flag):
    """prctl(PR_SET_DUMPABLE): the guest is not dumpable (no ptrace, no /proc/1/mem); its children become so again."""
    if _LIBC.prctl(PR_SET_DUMPABLE, int(flag), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl(PR_SET_DUMPABLE, {int(flag)}) failed")


def set_limits(limits):
    """Apply per-command rlimits and make this process the OOM killer's choice before the guest (in the child).

    A limit given as None is left as inherited (image sandboxes bound memory by their cgroup, not RLIMIT_AS).
    """
    set_dumpable(True)
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("500")
    cpu = None if limits["cpu_s"] is None else max(1, int(limits["cpu_s"]))
    for name, soft, hard in (
        ("RLIMIT_CPU", cpu, None if cpu is None else cpu + 1),
        ("RLIMIT_AS", limits["memory_bytes"], limits["memory_bytes"]),
        ("RLIMIT_NPROC", limits["processes"], limits["processes"]),
        ("RLIMIT_FSIZE", limits["file_size_bytes"], limits["file_size_bytes"]),
        ("RLIMIT_NOFILE", limits["open_files"], limits["open_files"]),
        ("RLIMIT_CORE", 0, 0),
    ):
        if soft is not None:
            resource.setrlimit(getattr(resource, name), (soft, hard))


CAP_SYS_CHROOT = 18
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER = 24, 47, 3
_CAP_V3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_cap(cap):
    """Drop one capability from this process for good: bounding, ambient, inheritable, permitted and effective sets.

    Used for CAP_SYS_CHROOT after a command's chroot into the image: with it, root could chroot into a subfolder
    and walk `..` out of the image into the guest's view of the host."""
    if _LIBC.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl(PR_CAPBSET_DROP, {cap}) failed")
    _LIBC.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, cap, 0, 0)  # EINVAL on kernels without ambient caps: fine
    header, data = _CapHeader(_CAP_V3, 0), (_CapData * 2)()
    if _LIBC.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    word, bit = divmod(cap, 32)
    for field in ("effective", "permitted", "inheritable"):
        setattr(data[word], field, getattr(data[word], field) & ~(1 << bit))
    if _LIBC.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def enter(root, cwd, user):
    """In a child about to exec: chroot into root (if any) and give up chroot for good, change to cwd and become user
    (if any)."""
    if root:
        os.chroot(root)
        drop_cap(CAP_SYS_CHROOT)
    os.chdir(cwd)
    if user is not None:
        os.setgroups(list(user.groups))
        os.setgid(user.gid)
        os.setuid(user.uid)


def _reset_child(out_fd, err_fd):
    """In a fresh child: new session, stdio wired (stdin /dev/null), other fds closed, signals back to default."""
    os.setsid()
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.closerange(3, 1 << 16)
    signal.set_wakeup_fd(-1)
    for name in _RESET_SIGNALS:
        signal.signal(getattr(signal, name), signal.SIG_DFL)


def _exec_child(launch, out_w, err_w):
    """Child side of fork: wire stdio, reset signals, apply limits, enter the image, exec the shell; never returns."""
    try:
        _reset_child(out_w, err_w)
        set_limits(launch.limits)
        enter(launch.root, launch.cwd, launch.user)
        shell = IMAGE_SHELL if launch.root and os.path.exists(IMAGE_SHELL) else SHELL
        os.execve(shell, [shell, "-c", launch.cmd], launch.env)
    except BaseException as e:  # noqa: BLE001 - report anything, then die
        os.write(2, f"sandbox: cannot start command: {e}\n".encode())
    os._exit(127)


def spawn(argv, env, cwd, limits, root, user, log_path):
    """Start a detached process (an image's ENTRYPOINT): own session, output appended to log_path; its pid."""
    pid = os.fork()
    if pid == 0:
        try:
            log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            _reset_child(log, log)
            set_limits(limits)
            enter(root, cwd, user)
            os.execvpe(argv[0], argv, env)
        except BaseException as e:  # noqa: BLE001 - report anything, then die
            os.write(2, f"sandbox: cannot start {argv!r}: {e}\n".encode())
        os._exit(127)
    return pid


class Drain:
    """Reads and discards what background processes still write to a finished command's pipes, until they close."""

    def __init__(self, sel, fds):
        self.sel = sel
        for fd in fds:
            sel.register(fd, selectors.EVENT_READ, self._read)

    def _read(self, fd, mask):
        """Discard available bytes; close at end of stream."""
        try:
            if os.read(fd, CHUNK):
                return
        except BlockingIOError:
            return
        except OSError:
            pass
        self.sel.unregister(fd)
        os.close(fd)


class Job:
    """One running command: its pipes registered on the guest's selector, its deadline and its captures.

    With `launch.root` set (image sandboxes) the command runs chrooted as `launch.user` and may leave background
    processes.
    """

    def __init__(self, sel, reaper, launch, timeout_s):
        limits = launch.limits
        self.sel, self.reaper, self.limits, self.background = sel, reaper, limits, bool(launch.root)
        self.start = time.monotonic()
        self.deadline = self.start + timeout_s
        self.exited_at = None
        self.captures = {"stdout": Capture(limits["output_bytes"]), "stderr": Capture(limits["output_bytes"])}
        self.killed, self.timed_out, self.done = None, False, False
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        self.pid = os.fork()
        if self.pid == 0:
            _exec_child(launch, out_w, err_w)
        os.close(out_w)
        os.close(err_w)
        self.fds = {out_r: "stdout", err_r: "stderr"}
        for fd in self.fds:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ, self._read)

    def time_left(self):
        """Seconds until the wall deadline, or the end of the grace after the shell exited (never negative)."""
        end = self.deadline if self.exited_at is None else min(self.deadline, self.exited_at + GRACE_S)
        return max(0.0, end - time.monotonic())

    def _read(self, fd, mask):
        """Move available output into its capture; close the pipe at end of stream."""
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            return
        if not data:
            self.sel.unregister(fd)
            os.close(fd)
            del self.fds[fd]
            return
        self.captures[self.fds[fd]].add(data)
        if sum(c.total for c in self.captures.values()) > self.limits["output_kill_bytes"]:
            self.killed = "output_limit"

    def poll(self):
        """Finish the job if its shell exited, its deadline passed or its output overflowed."""
        exited, now = self.pid in self.reaper.exits, time.monotonic()
        if now >= self.deadline and not exited:
            self.timed_out = True
        if not self.background:
            if exited or self.timed_out or self.killed:
                self._finish()
            return
        if exited and self.exited_at is None:
            self.exited_at = now
        if self.timed_out or self.killed:
            self._kill_group()
            self._hand_off()
        elif exited and (not self.fds or now >= self.exited_at + GRACE_S):
            self._hand_off()

    def _finish(self):
        """Kill what is left, drain the pipes to their end, mark done."""
        self.reaper.sweep()
        for fd in list(self.fds):
            os.set_blocking(fd, True)
            while fd in self.fds:
                self._read(fd, selectors.EVENT_READ)
        self.done = True

    def _kill_group(self):
        """SIGKILL the command's process group (image sandboxes: other processes keep running) and reap it."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        while self.pid not in self.reaper.exits and self.reaper.reap():
            time.sleep(0.001)

    def _hand_off(self):
        """Read what the pipes hold now, give pipes still open to a Drain, mark done (image sandboxes)."""
        for fd in list(self.fds):
            while fd in self.fds:
                before = sum(c.total for c in self.captures.values())
                self._read(fd, selectors.EVENT_READ)
                if fd in self.fds and sum(c.total for c in self.captures.values()) == before:
                    break
        left = list(self.fds)
        for fd in left:
            self.sel.unregister(fd)
        self.fds = {}
        if left:
            Drain(self.sel, left)
        self.done = True

    def result(self):
        """The command's outcome as a JSON-ready dict."""
        status, cpu = self.reaper.exits.pop(self.pid, (None, 0.0))
        code = None if status is None or self.timed_out else os.waitstatus_to_exitcode(status)
        out = {"ok": True, "exit_code": code, "timed_out": self.timed_out, "killed": self.killed,
               "wall_s": round(time.monotonic() - self.start, 6), "cpu_s": round(cpu, 6)}
        for name, cap in self.captures.items():
            out[name], out[name + "_tail"] = cap.result()
            out[name + "_bytes"] = cap.total
        self.reaper.exits.clear()
        return out

