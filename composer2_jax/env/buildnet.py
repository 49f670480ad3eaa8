"""Run one command in a fresh network namespace whose only way out is the egress proxy (for image builds).

Usage (as root): python3 -I -S buildnet.py EGRESS_SOCKET PORT -- COMMAND [ARG...]

The process unshares its network namespace (loopback only, brought up here), listens on 127.0.0.1:PORT and relays
each accepted connection byte for byte to the host's egress proxy through the Unix socket EGRESS_SOCKET (a
filesystem object, reachable from any network namespace), then runs COMMAND with http(s)_proxy pointing at that
port and exits with its status. Builds (debootstrap, `podman build --isolation chroot`) therefore reach exactly what
the build's EgressPolicy allows, and every request is in the proxy's log. Stdlib only.
"""

import ctypes
import fcntl
import os
import socket
import struct
import subprocess
import sys
import threading

CLONE_NEWNET = 0x40000000
SIOCSIFFLAGS = 0x8914
IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x1, 0x8, 0x40
CHUNK = 1 << 16


def unshare_network():
    """Move this process into a new network namespace and bring its loopback up."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNET): {os.strerror(err)}")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", IFF_UP | IFF_LOOPBACK | IFF_RUNNING, b""))


def pump(src, dst):
    """Copy bytes src -> dst until end of stream, then half-close dst."""
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def bridge(client, unix_path):
    """Relay one client connection to the egress socket in both directions."""
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(unix_path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def serve(listener, unix_path):
    """Accept proxy connections forever (daemon thread)."""
    while True:
        client, _ = listener.accept()
        threading.Thread(target=bridge, args=(client, unix_path), daemon=True).start()


def main(argv):
    """Parse EGRESS_SOCKET PORT -- COMMAND..., run COMMAND behind the relay, exit with its status."""
    if len(argv) < 5 or argv[3] != "--":
        sys.stderr.write("usage: buildnet.py EGRESS_SOCKET PORT -- COMMAND [ARG...]\n")
        return 2
    unix_path, port, command = argv[1], int(argv[2]), argv[4:]
    unshare_network()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    threading.Thread(target=serve, args=(listener, unix_path), daemon=True).start()
    proxy = f"http://127.0.0.1:{port}"
    env = dict(os.environ, http_proxy=proxy, https_proxy=proxy, HTTP_PROXY=proxy, HTTPS_PROXY=proxy,
               no_proxy="localhost,127.0.0.1", NO_PROXY="localhost,127.0.0.1")
    return subprocess.run(command, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv))
