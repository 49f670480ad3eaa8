"""pid 1 of a VM guest (stdlib only; started by the initramfs's /init, see env/vm/assets.py).

It bridges the virtio-serial port named "rpc" to a socketpair and starts the sandbox's guest process
(env/guest/main.py) on the other end, with the image's root filesystem at /.root: the guest process then serves the
host's tool RPC exactly as in a bubblewrap image sandbox. The guest process is made a child subreaper, so background
processes stay its descendants and its `sweep` reaps them, and gets no_new_privs (inherited by every command: a
setuid binary grants nothing, as under bwrap). The bridge never passes an end of stream to the guest process: while
the host is not connected (between a memory snapshot and the fork that resumes it) reads from the port return
nothing and the bridge waits, so the guest process and every other process of the VM resume where they were.

The guest process runs in a cgroup of its own whose pids.max (`vm.pids=N` on the kernel command line) bounds it and
every process its commands start, together: root in the guest is not bound by RLIMIT_NPROC, and a fork bomb would
otherwise grow until the guest stopped answering. This init and its bridge threads stay outside it.

With `vm.egress=PORT` on the kernel command line the guest has a network device whose only reachable address is the
host's egress forward (10.0.2.100:PORT); the guest process's egress socket is served here by connecting to it.
"""

import ctypes
import glob
import os
import select
import socket
import sys
import threading
import time

PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
EGRESS_SOCKET = "/run/egress.sock"
CGROUP = "/sys/fs/cgroup/sandbox"  # the guest process's cgroup (init.sh mounts cgroup2 at /sys/fs/cgroup)
FORWARD = ("10.0.2.100", 3128)


def cmdline():
    """key=value pairs of the kernel command line."""
    with open("/proc/cmdline") as f:
        return dict(item.split("=", 1) for item in f.read().split() if "=" in item)


def find_port(name, timeout_s=30.0):
    """/dev path of the virtio-serial port with this name."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for path in glob.glob("/sys/class/virtio-ports/*/name"):
            with open(path) as f:
                if f.read().strip() == name:
                    return "/dev/" + os.path.basename(os.path.dirname(path))
        time.sleep(0.05)
    raise SystemExit(f"guest_init: no virtio-serial port named {name!r}")


def port_to_socket(fd, sock):
    """Copy the host's bytes to the guest process; an unconnected host reads as nothing (never as an end of stream)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while True:
        events = poller.poll(1000)
        if not events or not events[0][1] & select.POLLIN:
            time.sleep(0.02)
            continue
        try:
            data = os.read(fd, 1 << 16)
        except OSError:
            data = b""
        if not data:
            time.sleep(0.02)
            continue
        sock.sendall(data)


def socket_to_port(sock, fd):
    """Copy the guest process's bytes to the host (retrying while the host is not connected)."""
    while True:
        data = sock.recv(1 << 16)
        if not data:
            return
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view):]
            except OSError:
                time.sleep(0.02)


def egress_bridge():
    """Serve EGRESS_SOCKET: each connection is piped to the host's egress forward over the (restricted) network."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(EGRESS_SOCKET)
    server.listen(64)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=_pipe_pair, args=(conn,), daemon=True).start()


def _pipe_pair(conn):
    """Join one guest-process connection to a TCP connection to the forward."""
    try:
        up = socket.create_connection(FORWARD, timeout=30)
    except OSError:
        conn.close()
        return
    up.settimeout(None)
    for a, b in ((conn, up), (up, conn)):
        threading.Thread(target=_copy, args=(a, b), daemon=True).start()


def _copy(a, b):
    """Copy a to b until either ends."""
    try:
        while True:
            data = a.recv(1 << 16)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def guest_cgroup(pids):
    """Create CGROUP with pids.max = pids (the pids controller enabled for the root's children)."""
    try:
        with open("/sys/fs/cgroup/cgroup.subtree_control", "w") as f:
            f.write("+pids")
        os.makedirs(CGROUP, exist_ok=True)
        with open(os.path.join(CGROUP, "pids.max"), "w") as f:
            f.write(str(pids))
    except OSError as e:
        raise SystemExit(f"guest_init: cannot bound the guest's processes with {CGROUP}/pids.max={pids}: {e}") from None


def start_guest(theirs, args):
    """Fork the guest process (a child subreaper) on the socketpair's other end; its pid."""
    pid = os.fork()
    if pid == 0:
        try:
            with open(os.path.join(CGROUP, "cgroup.procs"), "w") as f:
                f.write("0")  # this process, so the guest process and all it starts count against pids.max
        except OSError as e:
            raise SystemExit(f"guest_init: cannot move the guest process into {CGROUP}: {e}") from None
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:  # as bwrap does: no exec grants privileges (setuid)
            raise SystemExit(f"guest_init: PR_SET_NO_NEW_PRIVS failed (errno {ctypes.get_errno()})")
        os.set_inheritable(theirs.fileno(), True)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
        argv = [sys.executable, "-I", "-S", "/guest/main.py", str(theirs.fileno()), *args, "/.root"]
        os.execve(sys.executable, argv, env)
    return pid


def main():
    """Set the hostname, bridge the port, start the guest process in its cgroup and reap until it exits (then power
    off)."""
    opts = cmdline()
    socket.sethostname(opts.get("vm.hostname", "sandbox"))
    with open("/.root/etc/hosts", "w") as f:
        f.write(f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                f"127.0.1.1\t{opts.get('vm.hostname', 'sandbox')}\n")
    fd = os.open(find_port("rpc"), os.O_RDWR)
    ours, theirs = socket.socketpair()
    proxy = opts.get("vm.egress")
    if proxy:
        os.makedirs("/run", exist_ok=True)
        threading.Thread(target=egress_bridge, daemon=True).start()
    guest_cgroup(int(opts["vm.pids"]))
    guest = start_guest(theirs, [proxy or "0", EGRESS_SOCKET])
    theirs.close()
    threading.Thread(target=port_to_socket, args=(fd, ours), daemon=True).start()
    threading.Thread(target=socket_to_port, args=(ours, fd), daemon=True).start()
    while True:
        pid, _ = os.wait()
        if pid == guest:
            os.sync()
            ctypes.CDLL(None).reboot(0x4321FEDC)  # RB_POWER_OFF


if __name__ == "__main__":
    main()
