"""The egress proxy: one Unix socket per sandbox, HTTP parsed with h11, every request decided and logged.

Inside a sandbox, HTTP_PROXY/HTTPS_PROXY point at 127.0.0.1:PORT, which the guest relays to this proxy
through the bind-mounted Unix socket (see guest/relay.py). A plain-HTTP request must use an absolute
http:// URL and is forwarded to the (policy-checked, DNS-pinned) upstream with Connection: close;
CONNECT opens a TCP tunnel for TLS, which is not intercepted. Anything else, or anything the policy
refuses, gets a 4xx answer. Each request is one `EgressEvent` in the sandbox's `EgressLog`, stamped with the
sandbox's current phase ("agent", "verifier").

A phase may turn the mirror map on (env/mirrors.py; the verifier phase does): a URL it matches is answered from its
artifact whatever the policy says, and a CONNECT to a host with mirrored https URLs is terminated here with a
certificate of the per-run CA (env/tls.py) so the request inside can be answered (or refused with 404: only mirrored
URLs are served on such a host). Every other CONNECT stays a byte tunnel: TLS to the registries is never intercepted.
"""

from __future__ import annotations

import os
import socket
import threading
from urllib.parse import urlsplit

import h11

from composer2_jax.env.egress_policy import EgressEvent, EgressLog, EgressPolicy
from composer2_jax.env.mirrors import Artifact, MirrorError, MirrorMap

HOP_BY_HOP = {b"connection", b"keep-alive", b"proxy-connection", b"proxy-authorization", b"proxy-authenticate",
              b"te", b"trailer", b"upgrade"}
CHUNK = 1 << 16
MAX_CONNECTIONS = 64  # concurrent connections served per sandbox; more are closed at once
MAX_SOCKET_PATH = 107  # bytes in a Unix socket path (sun_path holds 108 with the terminating NUL)


class _Route:
    """What the proxy knows about one sandbox's socket."""

    def __init__(self, listener: socket.socket, path: str, policy: EgressPolicy):
        self.listener, self.path, self.policy, self.log = listener, path, policy, EgressLog()
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.mirrors: MirrorMap | None = None  # the mirror map while the current phase turns it on


class EgressProxy:
    """Serves every sandbox's egress socket; an accept thread per socket, a thread per connection."""

    def __init__(self, connect_timeout_s: float = 10.0, idle_timeout_s: float = 120.0,
                 mirrors: MirrorMap | None = None):
        self.connect_timeout_s, self.idle_timeout_s = connect_timeout_s, idle_timeout_s
        self.mirrors = mirrors  # None: MirrorMap.configured() when a phase first turns mirrors on
        self._routes: dict[str, _Route] = {}
        self._lock = threading.Lock()
        self._ca = None

    def ca(self):
        """The per-run CA that signs the mirror's certificates (env/tls.py), made on first use."""
        with self._lock:
            if self._ca is None:
                from composer2_jax.env.tls import PerRunCA

                self._ca = PerRunCA()
            return self._ca

    def set_phase(self, sid: str, phase: str, policy: EgressPolicy, mirrors: bool = False) -> None:
        """Enter a phase: its label on later events, its policy, and whether the mirror map answers."""
        route = self._route(sid)
        if mirrors and self.mirrors is None:
            with self._lock:
                if self.mirrors is None:
                    self.mirrors = MirrorMap.configured()
        route.policy, route.mirrors, route.log.phase = policy, (self.mirrors if mirrors else None), phase

    def add(self, sid: str, path: str, policy: EgressPolicy, uid: int, gid: int) -> None:
        """Listen on a new Unix socket for sandbox sid (owned by the sandbox user, who must connect to it)."""
        if len(os.fsencode(path)) > MAX_SOCKET_PATH:
            raise ValueError(f"egress socket path {path!r} is {len(os.fsencode(path))} bytes; a Unix socket's path "
                             f"must be at most {MAX_SOCKET_PATH} bytes (put it in a shorter directory)")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        os.chown(path, uid, gid)
        os.chmod(path, 0o600)
        listener.listen(64)
        route = _Route(listener, path, policy)
        with self._lock:
            self._routes[sid] = route
        threading.Thread(target=self._accept_loop, args=(route,), name=f"egress-{sid}", daemon=True).start()

    def set_policy(self, sid: str, policy: EgressPolicy) -> None:
        """Replace a sandbox's policy (applies to new requests)."""
        self._route(sid).policy = policy

    def log(self, sid: str) -> EgressLog:
        """The request log of a sandbox."""
        return self._route(sid).log

    def remove(self, sid: str) -> None:
        """Stop serving a sandbox and delete its socket."""
        with self._lock:
            route = self._routes.pop(sid, None)
        if route is not None:
            _close_listener(route.listener)
            try:
                os.unlink(route.path)
            except FileNotFoundError:
                pass

    def close(self) -> None:
        """Stop serving every sandbox."""
        for sid in list(self._routes):
            self.remove(sid)
        if self._ca is not None:
            self._ca.close()

    def _route(self, sid: str) -> _Route:
        """The route of sid, or a KeyError naming it."""
        with self._lock:
            route = self._routes.get(sid)
        if route is None:
            raise KeyError(f"no egress route for sandbox {sid!r}")
        return route

    def _accept_loop(self, route: _Route) -> None:
        """Accept connections until the listener is shut down."""
        while True:
            try:
                conn, _ = route.listener.accept()
            except OSError:
                return
            if not route.slots.acquire(blocking=False):
                conn.close()
                continue
            threading.Thread(target=self._serve, args=(route, conn), name="egress-conn", daemon=True).start()

    def _serve(self, route: _Route, conn: socket.socket) -> None:
        """Handle one proxied request on conn, then close it."""
        conn.settimeout(self.idle_timeout_s)
        try:
            _Exchange(conn, route.policy, route.log, self.connect_timeout_s, self.idle_timeout_s, route.mirrors,
                      self.ca).run()
        except (OSError, h11.ProtocolError):
            pass
        finally:
            conn.close()
            route.slots.release()


class _Exchange:
    """One request from a sandbox: parse, decide, log, then forward or tunnel."""

    def __init__(self, conn, policy, log, connect_timeout_s, idle_timeout_s, mirrors=None, ca=None):
        self.conn, self.policy, self.log, self.mirrors, self.ca = conn, policy, log, mirrors, ca
        self.connect_timeout_s, self.idle_timeout_s = connect_timeout_s, idle_timeout_s
        self.h = h11.Connection(h11.SERVER, max_incomplete_event_size=64 << 10)

    def run(self) -> None:
        """Read the request head, then dispatch on its method."""
        try:
            req = _next_event(self.conn, self.h)
        except h11.RemoteProtocolError as e:
            self.log.add("?", "?", 0, "?", False, f"malformed request: {e}")
            return self._reply(400, f"malformed request: {e}")
        if not isinstance(req, h11.Request):
            return
        method, target = req.method.decode(), req.target.decode("latin-1")
        where = _parse_target(method, target)
        if where is None:
            self.log.add(method, "?", 0, target, False, "not a proxy request (expected CONNECT host:port or http://...)")
            return self._reply(400, "proxy requests must be CONNECT host:port or an absolute http:// URL, "
                                    f"got {target!r}")
        host, port, path = where
        if self.mirrors is not None:
            if method == "CONNECT" and self.mirrors.intercepts(host, port):
                return self._intercept(host, port, target)
            hit = self.mirrors.match(target) if method != "CONNECT" else None
            if hit is not None:
                return self._serve_mirror(self.conn, self.h, method, host, port, target, hit)
        allowed, reason = self.policy.decide(method, host, port)
        address = None
        if allowed:
            address, reason = self.policy.resolve(host, port)
            allowed = address is not None
        event = self.log.add(method, host, port, target, allowed, reason)
        if not allowed:
            event.status = 403
            return self._reply(403, f"egress denied: {reason}")
        try:
            upstream = socket.create_connection((address, port), timeout=self.connect_timeout_s)
        except OSError as e:
            event.status = 502
            return self._reply(502, f"cannot connect to {host}:{port}: {e}")
        with upstream:
            upstream.settimeout(self.idle_timeout_s)
            if method == "CONNECT":
                self._tunnel(upstream, event)
            else:
                self._forward(req, path, upstream, event)

    def _reply(self, status: int, text: str) -> None:
        """Send a short plain-text response."""
        _reply(self.conn, self.h, status, text)

    def _serve_mirror(self, sock, h: h11.Connection, method: str, host: str, port: int, url: str, hit) -> None:
        """Answer a mirrored URL from its artifact (GET or HEAD) on sock (the client's, or the TLS session inside an
        intercepted CONNECT); the event names the rule and where the bytes came from."""
        rule, fields = hit
        event = self.log.add(method, host, port, url, True, f"mirror {rule.url}")
        if method not in ("GET", "HEAD"):
            event.allowed, event.status, event.reason = False, 405, f"mirror {rule.url} answers GET and HEAD only"
            return _reply(sock, h, 405, event.reason)
        try:
            art: Artifact = self.mirrors.artifact(rule, fields)
        except MirrorError as e:
            event.status, event.reason = 502, f"mirror {rule.url}: {e}"
            return _reply(sock, h, 502, event.reason)
        event.reason = f"mirrored from {art.source}"
        headers = [("Content-Type", art.content_type), ("Content-Length", str(art.size())), ("Connection", "close")]
        sock.sendall(h.send(h11.Response(status_code=200, headers=headers)))
        event.status = 200
        if method == "GET":
            if art.data is not None:
                sock.sendall(h.send(h11.Data(data=art.data)))
                event.bytes_down += len(art.data)
            else:
                with open(art.path, "rb") as f:
                    while chunk := f.read(CHUNK):
                        sock.sendall(h.send(h11.Data(data=chunk)))
                        event.bytes_down += len(chunk)
        sock.sendall(h.send(h11.EndOfMessage()))

    def _intercept(self, host: str, port: int, target: str) -> None:
        """CONNECT to a mirrored https host: answer 200, terminate TLS with the per-run CA's certificate for host,
        then answer the one request inside from the mirror map (404 when it is not a mirrored URL)."""
        event = self.log.add("CONNECT", host, port, target, True, "intercepted: the mirror map serves this host")
        try:
            ctx = self.ca().server_context(host)
        except Exception as e:  # noqa: BLE001 - no CA (cryptography missing): refuse, and say why
            event.allowed, event.status = False, 502
            event.reason = f"cannot intercept for the mirror: {type(e).__name__}: {e}"
            return self._reply(502, event.reason)
        self.conn.sendall(self.h.send(h11.Response(status_code=200, reason=b"Connection established", headers=[])))
        event.status = 200
        if self.h.trailing_data[0]:
            event.reason += " (client sent data before the tunnel was established; closed)"
            return
        with ctx.wrap_socket(self.conn, server_side=True) as tls:
            h = h11.Connection(h11.SERVER, max_incomplete_event_size=64 << 10)
            try:
                req = _next_event(tls, h)
            except h11.RemoteProtocolError:
                return
            if not isinstance(req, h11.Request):
                return
            method = req.method.decode()
            url = f"https://{host}{'' if port == 443 else f':{port}'}{req.target.decode('latin-1')}"
            hit = self.mirrors.match(url)
            if hit is None:
                ev = self.log.add(method, host, port, url, False, "not in the mirror map (this host is intercepted "
                                  "for its mirrored URLs only)")
                ev.status = 404
                return _reply(tls, h, 404, f"{url} is not mirrored here")
            self._serve_mirror(tls, h, method, host, port, url, hit)
            try:
                tls.unwrap()
            except (OSError, ValueError):
                pass

    def _tunnel(self, upstream: socket.socket, event: EgressEvent) -> None:
        """Answer 200 to CONNECT, then copy bytes both ways until both sides finish."""
        self.conn.sendall(self.h.send(h11.Response(status_code=200, reason=b"Connection established", headers=[])))
        event.status = 200
        early, _ = self.h.trailing_data
        if early:
            upstream.sendall(early)
            event.bytes_up += len(early)
        back = threading.Thread(target=_pump, args=(upstream, self.conn, event, "bytes_down"), daemon=True)
        back.start()
        _pump(self.conn, upstream, event, "bytes_up")
        back.join(self.idle_timeout_s)

    def _forward(self, req: h11.Request, path: str, upstream: socket.socket, event: EgressEvent) -> None:
        """Send the request upstream in origin form, stream the body both ways, relay the response."""
        client = h11.Connection(h11.CLIENT)
        headers = _end_to_end(req.headers) + [(b"connection", b"close")]
        upstream.sendall(client.send(h11.Request(method=req.method, target=path, headers=headers)))
        while True:
            ev = _next_event(self.conn, self.h)
            if isinstance(ev, h11.Data):
                event.bytes_up += len(ev.data)
                upstream.sendall(client.send(h11.Data(data=ev.data)))
            elif isinstance(ev, h11.EndOfMessage):
                upstream.sendall(client.send(h11.EndOfMessage()))
                break
            else:
                return
        while True:
            ev = _next_event(upstream, client)
            if isinstance(ev, h11.Response):
                event.status = ev.status_code
                head = h11.Response(status_code=ev.status_code, reason=ev.reason,
                                    headers=_end_to_end(ev.headers) + [(b"connection", b"close")])
                self.conn.sendall(self.h.send(head))
            elif isinstance(ev, h11.Data):
                event.bytes_down += len(ev.data)
                self.conn.sendall(self.h.send(h11.Data(data=ev.data)))
            elif isinstance(ev, h11.EndOfMessage):
                self.conn.sendall(self.h.send(h11.EndOfMessage()))
                return
            elif not isinstance(ev, h11.InformationalResponse):
                return


def _reply(sock, h: h11.Connection, status: int, text: str) -> None:
    """Send a short plain-text response on sock."""
    body = (text + "\n").encode()
    headers = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body))),
               ("Connection", "close")]
    sock.sendall(h.send(h11.Response(status_code=status, headers=headers)) + h.send(h11.Data(body))
                 + h.send(h11.EndOfMessage()))


def _parse_target(method: str, target: str) -> tuple[str, int, str] | None:
    """(host, port, origin-form path) of a proxy request target; None if it is not one."""
    if method == "CONNECT":
        host, sep, port = target.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit():
            return None
        return host, int(port), ""
    url = urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        return None
    try:
        port = url.port or 80
    except ValueError:
        return None
    return url.hostname, port, (url.path or "/") + (f"?{url.query}" if url.query else "")


def _end_to_end(headers) -> list[tuple[bytes, bytes]]:
    """Headers without the hop-by-hop ones (and without those named by Connection)."""
    named = {token.strip().lower() for name, value in headers if name == b"connection" for token in value.split(b",")}
    return [(k, v) for k, v in headers if k not in HOP_BY_HOP and k not in named]


def _next_event(sock: socket.socket, conn: h11.Connection):
    """The next h11 event, reading from sock as needed."""
    while True:
        ev = conn.next_event()
        if ev is h11.NEED_DATA:
            conn.receive_data(sock.recv(CHUNK))
            continue
        return ev


def _pump(src: socket.socket, dst: socket.socket, event: EgressEvent, counter: str) -> None:
    """Copy src to dst until src ends, counting bytes into event.<counter>; then half-close dst."""
    try:
        while True:
            data = src.recv(CHUNK)
            if not data:
                break
            dst.sendall(data)
            setattr(event, counter, getattr(event, counter) + len(data))
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _close_listener(listener: socket.socket) -> None:
    """Wake the accept thread and close the socket."""
    try:
        listener.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    listener.close()
