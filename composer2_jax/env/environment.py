"""`Environment`: sandboxes with snapshot / fork / restore, the tool-call RPC, egress logs and episode state.

    env = Environment()                      # or Environment(base_dir=..., limits=..., policy=...)
    sid = env.create("path/to/repo")         # copy the repo into a layer, start a sandbox on it
    obs = env.call(sid, "run_terminal_cmd", '{"command": "pytest -q"}')
    snap = env.snapshot(sid)                 # freeze what changed as a new read-only layer
    kid = env.fork(snap)                     # a new sandbox on the same layers, own empty upper layer
    env.restore(sid, snap); env.close(kid); env.shutdown()

Snapshots are chains of layers; forks share them, so a fork's cost does not depend on repository size.
Every method is thread-safe; calls on one sandbox run one at a time.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import secrets
import threading
from collections.abc import Mapping
from typing import Any

from composer2_jax.env.bwrap import command_env
from composer2_jax.env.config import SandboxConfig, SandboxLimits
from composer2_jax.env.egress_policy import EgressLog, EgressPolicy
from composer2_jax.env.layers import EMPTY, Chain
from composer2_jax.env.observation import Observation
from composer2_jax.env.pool import SandboxPool
from composer2_jax.env.runtime import Runtime
from composer2_jax.env.sandbox import Sandbox
from composer2_jax.env.tool_schemas import tool_specs
from composer2_jax.env.tools import Episode, ToolContext, call_tool


@dataclasses.dataclass
class _Record:
    """Everything the environment keeps about one sandbox."""

    sandbox: Sandbox
    episode: Episode
    log: EgressLog
    parent: str | None


def _repo_dir(task: Any) -> str | None:
    """The repository directory of a task: a path, an object with .repo_dir, a mapping with 'repo_dir', or None."""
    if task is None:
        return None
    if isinstance(task, (str, os.PathLike)):
        return os.fspath(task)
    if isinstance(task, Mapping) and "repo_dir" in task:
        return os.fspath(task["repo_dir"])
    if hasattr(task, "repo_dir"):
        return os.fspath(task.repo_dir)
    raise TypeError(f"task {task!r} has no repository; expected a path, .repo_dir or a mapping with 'repo_dir'")


class Environment:
    """Creates and drives sandboxes; see the module docstring."""

    def __init__(self, base_dir: str | None = None, limits: SandboxLimits | None = None,
                 policy: EgressPolicy | None = None, config: SandboxConfig | None = None,
                 pool_size: int | None = None):
        config = config or SandboxConfig()
        if base_dir is not None:
            config = dataclasses.replace(config, base_dir=os.fspath(base_dir))
        if pool_size is not None:
            config = dataclasses.replace(config, pool_size=pool_size)
        self.limits, self.policy = limits or SandboxLimits(), policy or EgressPolicy()
        self.rt = Runtime(config, self.limits)
        self._env = command_env(config)
        self._records: dict[str, _Record] = {}
        self._closed: dict[str, _Record] = {}
        self._snapshots: dict[str, Chain] = {}
        self._lock = threading.Lock()
        self.pool = SandboxPool(self.rt, config.pool_size)
        self._shut = False
        atexit.register(self.shutdown)  # sandboxes die with this process anyway; this also removes cgroups and dirs

    # ---------------------------------------------------------------------------------------- sandboxes

    def create(self, task_or_repo_dir: Any = None, policy: EgressPolicy | None = None) -> str:
        """A new sandbox whose workspace is a copy of the task's repository (empty if None); its id."""
        src = _repo_dir(task_or_repo_dir)
        chain = self.rt.layers.import_dir(src) if src else (EMPTY,)
        return self._start(chain, policy, parent=None, episode=Episode())

    def import_repo(self, repo_dir: Any) -> str:
        """Copy a repository into a layer once and return a snapshot id to fork many sandboxes from."""
        chain = self.rt.layers.import_dir(_repo_dir(repo_dir))
        return self._register_snapshot(chain)

    def fork(self, source: str, policy: EgressPolicy | None = None) -> str:
        """A new sandbox on a snapshot, or on a sandbox's current state (snapshotting it); its id.

        A fork of a sandbox starts with a copy of its parent's todo list and the parent's egress policy.
        """
        with self._lock:
            chain = self._snapshots.get(source)
            record = self._records.get(source)
            if chain is not None:
                self.rt.layers.pin(chain)
        if chain is not None:
            return self._start(chain, policy, parent=None, episode=Episode())
        if record is None:
            raise KeyError(f"{source!r} is neither a live sandbox nor a snapshot")
        with record.sandbox.lock:
            chain = self._freeze(record.sandbox)  # pinned until _start registers the fork
        episode = Episode(todos=[dict(t) for t in record.episode.todos])
        return self._start(chain, policy or record.sandbox.policy, parent=source, episode=episode)

    def snapshot(self, sid: str) -> str:
        """Freeze the sandbox's workspace as a snapshot id (its later writes do not change the snapshot)."""
        sbx = self._record(sid).sandbox
        with sbx.lock:
            chain = self._freeze(sbx)
        return self._register_snapshot(chain)

    def restore(self, sid: str, snapshot: str) -> None:
        """Return a sandbox's workspace to a snapshot (its processes are killed first)."""
        sbx = self._record(sid).sandbox
        chain = self._snapshot(snapshot, pin=True)
        try:
            with sbx.lock:
                sbx.sweep()
                sbx.mount(chain)
        finally:
            self.rt.layers.commit(chain)
        self._gc()

    def close(self, sid: str) -> dict:
        """Kill every process of the sandbox and release it; returns its final episode state."""
        with self._lock:
            record = self._records.pop(sid, None)
            if record is None:
                raise KeyError(f"no live sandbox {sid!r}")
            self._closed[sid] = record
        record.sandbox.close()
        self._gc()
        return record.episode.to_dict()

    def delete_snapshot(self, snapshot: str) -> None:
        """Forget a snapshot; its layers are deleted once no sandbox or snapshot uses them."""
        with self._lock:
            if self._snapshots.pop(snapshot, None) is None:
                raise KeyError(f"no snapshot {snapshot!r}")
        self._gc()

    # ---------------------------------------------------------------------------------------- tools & state

    def call(self, sid: str, tool: Any, args: Any = None) -> Observation:
        """Run one tool call (args: a dict or the model's raw JSON string); never raises."""
        with self._lock:
            record = self._records.get(sid)
        if record is None:
            return Observation.failure("unknown_sandbox", f"no live sandbox {sid!r}")
        with record.sandbox.lock:
            return call_tool(ToolContext(record.sandbox, record.episode, self.limits, self._env), tool, args)

    @staticmethod
    def tools() -> list[dict]:
        """The OpenAI-style function specs of the tools."""
        return tool_specs()

    def egress_log(self, sid: str, since: int = 0) -> list[dict]:
        """The sandbox's egress events (allowed and denied) with seq >= since."""
        return self._record(sid, closed_ok=True).log.events(since)

    def todos(self, sid: str) -> list[dict]:
        """The sandbox's current todo list."""
        return [dict(t) for t in self._record(sid, closed_ok=True).episode.todos]

    def episode(self, sid: str) -> dict:
        """Episode state: todos, submitted, summary, call and error counts."""
        return self._record(sid, closed_ok=True).episode.to_dict()

    def info(self, sid: str) -> dict:
        """Diagnostics: host pid of the sandbox's pid 1, its pid namespace, layer chain, cgroups, liveness."""
        record = self._record(sid)
        sbx = record.sandbox
        return {"sid": sid, "pid": sbx.pid, "pidns": sbx.pidns, "alive": sbx.alive(), "chain": list(sbx.chain or ()),
                "cgroups": list(sbx.cgroup_dirs), "parent": record.parent, "policy": sbx.policy.to_dict()}

    def sandboxes(self) -> list[str]:
        """Ids of the live sandboxes."""
        with self._lock:
            return list(self._records)

    def snapshots(self) -> list[str]:
        """Ids of the known snapshots."""
        with self._lock:
            return list(self._snapshots)

    # ---------------------------------------------------------------------------------------- teardown

    def shutdown(self) -> None:
        """Close every sandbox and the shared services; remove the base dir if it was a temporary one (idempotent)."""
        with self._lock:
            if self._shut:
                return
            self._shut = True
        atexit.unregister(self.shutdown)
        self.pool.close()
        for sid in self.sandboxes():
            self.close(sid)
        self.rt.close()

    def __enter__(self):
        """The environment itself; `shutdown` runs on exit."""
        return self

    def __exit__(self, *exc) -> None:
        """Shut down."""
        self.shutdown()

    # ---------------------------------------------------------------------------------------- internals

    def _start(self, chain: Chain, policy: EgressPolicy | None, parent: str | None, episode: Episode) -> str:
        """Take a started sandbox, mount chain as its workspace and register it."""
        try:
            sbx = self.pool.take(policy or self.policy)
            try:
                sbx.mount(chain)
            except Exception:
                sbx.close()
                raise
        except Exception:
            self.rt.layers.commit(chain)
            raise
        with self._lock:
            self._records[sbx.sid] = _Record(sbx, episode, self.rt.proxy.log(sbx.sid), parent)
        self.rt.layers.commit(chain)
        return sbx.sid

    def _freeze(self, sbx: Sandbox) -> Chain:
        """Freeze a sandbox's upper layer (its lock held) and remount it; the new chain, pinned until committed."""
        sbx.sweep()
        frozen = self.rt.layers.freeze(sbx.upper_dir(), sbx.chain)
        if frozen == sbx.chain:
            self.rt.layers.pin(frozen)
            return frozen
        chain = frozen
        if len(chain) > self.rt.config.max_layers:
            chain = self.rt.layers.squash(chain, self.rt.mountd)
            self.rt.layers.commit(frozen[:1])  # the squashed-away top layer is garbage once unused
        sbx.mount(chain)
        return chain

    def _register_snapshot(self, chain: Chain) -> str:
        """Store a chain under a new snapshot id."""
        snap = f"snap-{secrets.token_hex(6)}"
        with self._lock:
            self._snapshots[snap] = chain
        self.rt.layers.commit(chain)
        return snap

    def _snapshot(self, snapshot: str, pin: bool = False) -> Chain:
        """The chain of a snapshot id (pinned against gc if asked), or a KeyError naming it."""
        with self._lock:
            chain = self._snapshots.get(snapshot)
            if chain is not None and pin:
                self.rt.layers.pin(chain)
        if chain is None:
            raise KeyError(f"no snapshot {snapshot!r}")
        return chain

    def _record(self, sid: str, closed_ok: bool = False) -> _Record:
        """The record of a live (or, if closed_ok, closed) sandbox, or a KeyError naming it."""
        with self._lock:
            record = self._records.get(sid) or (self._closed.get(sid) if closed_ok else None)
        if record is None:
            raise KeyError(f"no live sandbox {sid!r}")
        return record

    def _gc(self) -> None:
        """Delete layers that no live sandbox or snapshot uses."""
        with self._lock:
            live = {layer for chain in self._snapshots.values() for layer in chain}
            live |= {layer for r in self._records.values() for layer in (r.sandbox.chain or ())}
        self.rt.layers.gc(live)
