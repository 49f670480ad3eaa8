"""`EnvironmentClient`: the Environment API over HTTP (see server.py), with the same methods and errors."""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any
from urllib.parse import urlsplit

from composer2_jax.env.changes import WorkspaceChanges
from composer2_jax.env.egress_policy import EgressPolicy
from composer2_jax.env.observation import Observation
from composer2_jax.env.transfer import pack_parts

_ERRORS = {"KeyError": KeyError, "TypeError": TypeError, "ValueError": ValueError,
           "FileNotFoundError": FileNotFoundError, "NotADirectoryError": NotADirectoryError,
           "PermissionError": PermissionError}


class RemoteError(RuntimeError):
    """The server failed a request with an error that has no local equivalent."""


class EnvironmentClient:
    """Drives a remote Environment; one keep-alive connection per thread."""

    def __init__(self, url: str, token: str | None = None, timeout_s: float = 900.0):
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"url {url!r}; expected http://HOST:PORT")
        self.host, self.port, self.timeout_s = parts.hostname, parts.port or 80, timeout_s
        self._headers = {"Content-Type": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._local = threading.local()

    def _conn(self, fresh: bool = False) -> http.client.HTTPConnection:
        """This thread's connection."""
        if fresh or getattr(self._local, "conn", None) is None:
            self._local.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        return self._local.conn

    def _rpc(self, method: str, **params: Any) -> Any:
        """POST one call; the result, or the server's error raised as the matching exception."""
        body = json.dumps(params).encode()
        for attempt in (0, 1):
            conn = self._conn(fresh=attempt == 1)
            try:
                conn.request("POST", f"/v1/{method}", body=body, headers=self._headers)
                resp = conn.getresponse()
                payload = json.loads(resp.read() or b"{}")
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                conn.close()
                if attempt == 1:
                    raise
        if "error" in payload:
            err = payload["error"]
            raise _ERRORS.get(err.get("type"), RemoteError)(err.get("message", f"{method} failed"))
        return payload["result"]

    @staticmethod
    def _policy(policy: EgressPolicy | None) -> dict | None:
        """JSON form of an optional policy."""
        return policy.to_dict() if policy is not None else None

    def create(self, task_or_repo_dir: Any = None, policy: EgressPolicy | None = None) -> str:
        """See Environment.create (the path is on the server's host)."""
        repo = (task_or_repo_dir if task_or_repo_dir is None or isinstance(task_or_repo_dir, str)
                else str(task_or_repo_dir))
        return self._rpc("create", task_or_repo_dir=repo, policy=self._policy(policy))

    def import_repo(self, repo_dir: str) -> str:
        """See Environment.import_repo."""
        return self._rpc("import_repo", repo_dir=str(repo_dir))

    def call(self, sid: str, tool: Any, args: Any = None) -> Observation:
        """See Environment.call."""
        return Observation.from_dict(self._rpc("call", sid=sid, tool=tool, args=args))

    def exec(self, sid: str, command: str, timeout_s: float | None = None, user: str | None = None,
             cwd: str | None = None, env: dict[str, str] | None = None) -> dict:
        """See Environment.exec."""
        return self._rpc("exec", sid=sid, command=command, timeout_s=timeout_s, user=user, cwd=cwd, env=env)

    def put_dir(self, sid: str, src: str, dest: str, user: str | None = None, exclude: tuple[str, ...] = ()) -> None:
        """See Environment.put_dir (src is on this host; it travels packed)."""
        for part in pack_parts(src, exclude):
            self._rpc("put_archive", sid=sid, data=part, dest=dest, user=user)

    def new_episode(self, sid: str) -> dict:
        """See Environment.new_episode."""
        return self._rpc("new_episode", sid=sid)

    def set_episode(self, sid: str, state: dict) -> None:
        """See Environment.set_episode."""
        self._rpc("set_episode", sid=sid, state=state)

    def snapshot(self, sid: str) -> str:
        """See Environment.snapshot."""
        return self._rpc("snapshot", sid=sid)

    def fork(self, source: str, policy: EgressPolicy | None = None, keep_origin: bool = False) -> str:
        """See Environment.fork."""
        return self._rpc("fork", source=source, policy=self._policy(policy), keep_origin=keep_origin)

    def restore(self, sid: str, snapshot: str) -> None:
        """See Environment.restore."""
        self._rpc("restore", sid=sid, snapshot=snapshot)

    def close(self, sid: str) -> dict:
        """See Environment.close."""
        return self._rpc("close", sid=sid)

    def delete_snapshot(self, snapshot: str) -> None:
        """See Environment.delete_snapshot."""
        self._rpc("delete_snapshot", snapshot=snapshot)

    def egress_log(self, sid: str, since: int = 0) -> list[dict]:
        """See Environment.egress_log."""
        return self._rpc("egress_log", sid=sid, since=since)

    def changes(self, sid: str) -> WorkspaceChanges:
        """See Environment.changes."""
        return WorkspaceChanges.from_dict(self._rpc("changes", sid=sid))

    def todos(self, sid: str) -> list[dict]:
        """See Environment.todos."""
        return self._rpc("todos", sid=sid)

    def episode(self, sid: str) -> dict:
        """See Environment.episode."""
        return self._rpc("episode", sid=sid)

    def info(self, sid: str) -> dict:
        """See Environment.info."""
        return self._rpc("info", sid=sid)

    def tools(self) -> list[dict]:
        """See Environment.tools."""
        return self._rpc("tools")

    def sandboxes(self) -> list[str]:
        """See Environment.sandboxes."""
        return self._rpc("sandboxes")

    def snapshots(self) -> list[str]:
        """See Environment.snapshots."""
        return self._rpc("snapshots")
