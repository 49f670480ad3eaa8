"""The egress bridge inside the sandbox: 127.0.0.1:PORT in the sandbox's network namespace ⇄ a Unix socket.

The sandbox has loopback only. The guest listens on 127.0.0.1:PORT (HTTP_PROXY points there) and pipes each
accepted connection, byte for byte, to the host's egress proxy through the bind-mounted Unix socket. All
sockets are non-blocking and share the guest's selector, so relaying goes on while a command runs.
"""

import selectors
import socket

CHUNK = 1 << 16
HIGH_WATER = 1 << 20
MAX_LINKS = 64  # concurrent proxy connections per sandbox; more are refused (bounds host-side threads)


class Relay:
    """Accepts proxy connections inside the sandbox and bridges each to the host's Unix socket."""

    def __init__(self, sel, port, unix_path):
        self.sel, self.unix_path = sel, unix_path
        self.links: set = set()
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(128)
        self.listener.setblocking(False)
        sel.register(self.listener, selectors.EVENT_READ, self._accept)

    def _accept(self, sock, mask):
        """Accept one client and connect it to the host proxy (closed at once if the proxy is unreachable)."""
        try:
            client, _ = sock.accept()
        except BlockingIOError:
            return
        self.links = {link for link in self.links if not link.closed}
        if len(self.links) >= MAX_LINKS:
            client.close()
            return
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(self.unix_path)
        except OSError:
            upstream.close()
            client.close()
            return
        self.links.add(_Link(self.sel, client, upstream))


class _Link:
    """Two connected sockets pumped into each other with back-pressure and half-close."""

    def __init__(self, sel, a, b):
        self.sel, self.peer = sel, {a: b, b: a}
        self.out = {a: bytearray(), b: bytearray()}  # bytes waiting to be written to each socket
        self.eof, self.closed = set(), False
        for s in (a, b):
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ, self._event)

    def _event(self, sock, mask):
        """Handle readiness on one side, then recompute what each side waits for."""
        try:
            if mask & selectors.EVENT_WRITE:
                self._flush(sock)
            if mask & selectors.EVENT_READ:
                self._pull(sock)
        except OSError:
            self._close()
            return
        self._rearm()

    def _pull(self, sock):
        """Read from sock into the peer's outgoing buffer; note end of stream."""
        try:
            data = sock.recv(CHUNK)
        except BlockingIOError:
            return
        if not data:
            self.eof.add(sock)
            return
        self.out[self.peer[sock]] += data
        self._flush(self.peer[sock])

    def _flush(self, sock):
        """Write as much of sock's outgoing buffer as it takes; half-close once its peer ended."""
        buf = self.out[sock]
        if buf:
            try:
                sent = sock.send(buf)
            except BlockingIOError:
                sent = 0
            del buf[:sent]
        if not buf and self.peer[sock] in self.eof:
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def _rearm(self):
        """Register each socket for the events it now needs; close the link when both sides are done."""
        if self.closed:
            return
        if len(self.eof) == 2 and not any(self.out.values()):
            self._close()
            return
        for s, peer in self.peer.items():
            events = 0
            if s not in self.eof and len(self.out[peer]) < HIGH_WATER:
                events |= selectors.EVENT_READ
            if self.out[s]:
                events |= selectors.EVENT_WRITE
            self._set(s, events)

    def _set(self, sock, events):
        """Modify, add or drop a socket's selector registration."""
        registered = _is_registered(self.sel, sock)
        if events and registered:
            self.sel.modify(sock, events, self._event)
        elif events:
            self.sel.register(sock, events, self._event)
        elif registered:
            self.sel.unregister(sock)

    def _close(self):
        """Drop both sockets."""
        self.closed = True
        for s in self.peer:
            if _is_registered(self.sel, s):
                self.sel.unregister(s)
            s.close()


def _is_registered(sel, sock):
    """True if sock is currently registered on sel."""
    try:
        sel.get_key(sock)
        return True
    except (KeyError, ValueError):
        return False
