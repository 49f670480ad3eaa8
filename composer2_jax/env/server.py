"""The Environment API as JSON over HTTP, so rollout workers on other hosts can drive sandboxes.

Usage: python -m composer2_jax.env.server --port 8765 [--host 127.0.0.1] [--allow-host pypi.org ...]

POST /v1/<method> with a JSON object of keyword arguments answers {"result": ...} or, on failure,
{"error": {"type": ..., "message": ...}} with status 400 (bad request), 404 (unknown id), 401 (token)
or 500. GET /v1/tools and GET /healthz need no body. The server binds loopback by default and has no
TLS: to reach it from another host, tunnel it or pass --host with a --token.
"""

from __future__ import annotations

import argparse
import hmac
import json
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from composer2_jax.env.changes import WorkspaceChanges
from composer2_jax.env.egress_policy import EgressPolicy
from composer2_jax.env.environment import Environment
from composer2_jax.env.observation import Observation
from composer2_jax.env.sandbox import SandboxError

METHODS = ("create", "import_repo", "call", "snapshot", "fork", "restore", "close", "delete_snapshot",
           "egress_log", "todos", "episode", "info", "tools", "sandboxes", "snapshots", "exec", "put_archive",
           "new_episode", "changes", "set_episode")
MAX_BODY = 64 << 20


def _invoke(env: Environment, method: str, params: dict[str, Any]) -> Any:
    """Call an Environment method with JSON params and make its result JSON-ready."""
    if "policy" in params and params["policy"] is not None:
        params = {**params, "policy": EgressPolicy.from_dict(params["policy"])}
    result = getattr(env, method)(**params)
    return result.to_dict() if isinstance(result, (Observation, WorkspaceChanges)) else result


def _status(e: BaseException) -> int:
    """HTTP status for an exception raised by the Environment."""
    if isinstance(e, KeyError):
        return 404
    if isinstance(e, (TypeError, ValueError, FileNotFoundError, NotADirectoryError)):
        return 400
    return 500


def make_handler(env: Environment, token: str | None):
    """A request handler class bound to one Environment."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):  # quiet: one line per request is too much for rollouts
            pass

        def _send(self, status: int, payload: dict) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _authorised(self) -> bool:
            if token is None:
                return True
            given = self.headers.get("Authorization", "")
            if hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                return True
            self._send(401, {"error": {"type": "PermissionError", "message": "missing or wrong bearer token"}})
            return False

        def do_GET(self):
            if not self._authorised():
                return
            if self.path == "/healthz":
                return self._send(200, {"result": "ok"})
            if self.path == "/v1/tools":
                return self._send(200, {"result": env.tools()})
            self._send(404, {"error": {"type": "KeyError", "message": f"no route GET {self.path}"}})

        def do_POST(self):
            size = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(size) if 0 < size <= MAX_BODY else b""
            if not self._authorised():
                return
            method = self.path.removeprefix("/v1/")
            if method not in METHODS:
                return self._send(404, {"error": {"type": "KeyError",
                                                  "message": f"unknown method {method!r}; expected one of {METHODS}"}})
            try:
                params = json.loads(body or b"{}")
                if not isinstance(params, dict):
                    raise TypeError(f"request body must be a JSON object of arguments, got {type(params).__name__}")
                self._send(200, {"result": _invoke(env, method, params)})
            except (KeyError, TypeError, ValueError, OSError, SandboxError) as e:
                message = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
                self._send(_status(e), {"error": {"type": type(e).__name__, "message": str(message)}})

    return Handler


def serve(env: Environment, host: str = "127.0.0.1", port: int = 0, token: str | None = None) -> ThreadingHTTPServer:
    """Start serving env in a background thread; returns the server (server.server_address has the port)."""
    server = ThreadingHTTPServer((host, port), make_handler(env, token))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="env-server", daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> None:
    """Parse flags, build the Environment, serve until interrupted."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True, help="TCP port (0: pick a free one and print it)")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default loopback)")
    p.add_argument("--base-dir", default=None, help="sandbox state dir (default: a fresh temporary dir)")
    p.add_argument("--pool-size", type=int, default=4, help="sandboxes kept started in advance")
    p.add_argument("--allow-host", action="append", default=[], help="egress host pattern (repeatable)")
    p.add_argument("--allow-port", action="append", type=int, default=[], help="egress port (default 80, 443)")
    p.add_argument("--allow-private", action="store_true", help="allow egress to private/loopback addresses")
    p.add_argument("--token", default=None, help="require 'Authorization: Bearer TOKEN' on every request")
    args = p.parse_args(argv)
    policy = EgressPolicy(allow_hosts=tuple(args.allow_host), allow_ports=tuple(args.allow_port) or (80, 443),
                          allow_private=args.allow_private)
    env = Environment(base_dir=args.base_dir, policy=policy, pool_size=args.pool_size)
    server = serve(env, args.host, args.port, args.token)
    host, port = server.server_address[:2]
    print(f"listening on http://{host}:{port}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # clean up sandboxes and cgroups on kill
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        env.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
