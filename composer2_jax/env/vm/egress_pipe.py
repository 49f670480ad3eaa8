"""QEMU guestfwd command of a VM with egress: join stdin/stdout (one guest connection) to the egress proxy's socket.

Usage: python3 egress_pipe.py SOCKET_PATH (run by QEMU's user-mode network for each connection the guest opens to
the forward address; the socket is the sandbox's route into env/egress.py's proxy, as for a bubblewrap sandbox).
"""

import os
import socket
import sys
import threading


def main(path):
    """Copy stdin to the socket and the socket to stdout until either side ends."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)

    def up():
        while True:
            data = os.read(0, 1 << 16)
            if not data:
                break
            sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)

    threading.Thread(target=up, daemon=True).start()
    while True:
        data = sock.recv(1 << 16)
        if not data:
            break
        os.write(1, data)


if __name__ == "__main__":
    main(sys.argv[1])
