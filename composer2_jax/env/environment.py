"""`Environment`: sandboxes with snapshot / fork / restore, the tool-call RPC, egress logs and episode state.

    env = Environment()                      # or Environment(base_dir=..., limits=..., policy=...)
    sid = env.create("path/to/repo")         # copy the repo into a layer, start a sandbox on it
    obs = env.call(sid, "run_terminal_cmd", '{"command": "pytest -q"}')
    snap = env.snapshot(sid)                 # freeze what changed as a new read-only layer
    kid = env.fork(snap)                     # a new sandbox on the same layers, own empty upper layer
    env.restore(sid, snap); env.close(kid); env.shutdown()

Snapshots are chains of layers; forks share them, so a fork's cost does not depend on repository size.
Every method is thread-safe; calls on one sandbox run one at a time.

Image sandboxes run a whole image (composer2_jax.env.images) as root in their own user namespace:

    snap = env.import_image(image, workdir="/app")  # the image's exported layers as a snapshot (nothing copied)
    sid = env.fork(snap, resources=Resources(cpus=1, memory_bytes=2 << 30, storage_bytes=10 << 30))
    env.exec(sid, "apt-get update", timeout_s=600)  # host-side command (not a model tool call; not capped)

Their root filesystem is the image's layers plus the sandbox's own upper layer, so writes anywhere (/etc, /usr,
/app) are private to the sandbox; snapshot, fork and restore work on that layering as on a workspace (a snapshot
stops the sandbox's processes and restarts its entrypoint: snapshots are of files, not of processes).
"""

from __future__ import annotations

import atexit
import collections
import copy
import dataclasses
import os
import secrets
import threading
import weakref
from collections.abc import Mapping
from typing import Any, NamedTuple

from composer2_jax.env.budget import Lineage, tree_bytes
from composer2_jax.env.bwrap import command_env
from composer2_jax.env.changes import WorkspaceChanges, layer_changes
from composer2_jax.env.egress_policy import EgressLog, EgressPolicy
from composer2_jax.env.layers import EMPTY, Chain
from composer2_jax.env.mirrors import MirrorMap
from composer2_jax.env.observation import Observation
from composer2_jax.env.pool import SandboxPool, new_sid
from composer2_jax.env.profile import ImageProfile, profile_of
from composer2_jax.env.runtime import Runtime
from composer2_jax.env.sandbox import Sandbox, SandboxError
from composer2_jax.env.sandbox_config import Resources, SandboxConfig, SandboxLimits
from composer2_jax.env.tool_schemas import tool_specs
from composer2_jax.env.tools import Episode, ToolContext, call_tool
from composer2_jax.env.transfer import pack_parts

CLOSED_KEPT = 4096  # records of closed sandboxes kept readable (a long RL run closes millions: bounded, not all)


@dataclasses.dataclass
class _Record:
    """Everything the environment keeps about one sandbox."""

    sandbox: Sandbox
    episode: Episode
    log: EgressLog
    parent: str | None
    profile: ImageProfile | None = None  # image sandboxes: how they run things; None for workspace sandboxes
    resources: Resources = dataclasses.field(default_factory=Resources)  # per-sandbox limits (image sandboxes)
    origin: Chain = ()  # the chain the sandbox was started or restored on: its changes are what lies above it
    egress_seen: int = 0  # egress events before this seq were already shown in an observation
    lineage: Lineage | None = None  # the disk budget its snapshots and forks share (env/budget.py)


class _Seed(NamedTuple):
    """What a new sandbox starts with besides its layer chain and egress policy (`Environment._start`)."""

    parent: str | None  # the sandbox it was forked from (None: a snapshot or nothing)
    episode: Episode  # its episode state (a fork of a sandbox copies the todo list)
    profile: ImageProfile | None = None  # image sandboxes: how they run things; None for workspace sandboxes
    resources: Resources | None = None  # its limits (None: the defaults)
    origin: Chain | None = None  # the chain its changes count from (None: the chain it mounts)
    lineage: Lineage | None = None  # the disk budget it shares (None: a new lineage with the resources' budget)


def with_egress(obs: Observation, events: list[dict]) -> Observation:
    """The observation with one `network: …` line per egress event appended, and the events in fields["egress"]."""
    if not events:
        return obs
    lines = "\n".join(f"network: {e['summary']}" for e in events)
    content = f"{obs.content}\n{lines}" if obs.content else lines
    return dataclasses.replace(obs, content=content, fields={**obs.fields, "egress": events})


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


# SandboxConfig.backend → the Environment subclass that runs it, for backends other than "bwrap" (this class). Each
# registers itself where it is defined (env/vm/environment.py: "vm"); importing composer2_jax.env registers them all.
BACKENDS: dict[str, type] = {}


class Environment:
    """Creates and drives sandboxes; see the module docstring. With `SandboxConfig(backend="vm")` it is a
    `vm.environment.VmEnvironment`: the same API, every sandbox a VM with memory snapshots (docs/env.md)."""

    def __new__(cls, *args, **kwargs):
        """An Environment, or the registered subclass of the config's backend (argument 4 or config=)."""
        config = kwargs.get("config", args[3] if len(args) > 3 else None)
        if cls is Environment and config is not None and config.backend != "bwrap":
            if config.backend not in BACKENDS:
                raise ValueError(f"backend={config.backend!r} has no registered Environment; registered: "
                                 f"{sorted(BACKENDS)} (importing composer2_jax.env registers them)")
            cls = BACKENDS[config.backend]
        return super().__new__(cls)

    def __init__(self, base_dir: str | None = None, limits: SandboxLimits | None = None,
                 policy: EgressPolicy | None = None, config: SandboxConfig | None = None,
                 pool_size: int | None = None, mirrors: MirrorMap | None = None):
        config = config or SandboxConfig()
        if base_dir is not None:
            config = dataclasses.replace(config, base_dir=os.fspath(base_dir))
        if pool_size is not None:
            config = dataclasses.replace(config, pool_size=pool_size)
        self.limits, self.policy = limits or SandboxLimits(), policy or EgressPolicy()
        self.rt = Runtime(config, self.limits)
        if mirrors is not None:  # else $COMPOSER2_MIRRORS or the defaults, on first use (env/mirrors.py)
            self.rt.proxy.mirrors = mirrors
        self._env = command_env(config)
        self._records: dict[str, _Record] = {}
        # closed sandboxes' records (episode, egress log, disk figures stay readable), the newest CLOSED_KEPT
        self._closed: collections.OrderedDict[str, _Record] = collections.OrderedDict()
        self._snapshots: dict[str, Chain] = {}
        self._origins: dict[str, Chain] = {}  # snapshot id -> the chain its sandbox started on (fork keep_origin)
        self._profiles: dict[str, ImageProfile] = {}  # snapshot id -> profile, for snapshots of images
        self._lineages: dict[str, Lineage] = {}  # snapshot id -> the lineage of the sandbox it was taken of
        self._every_lineage: weakref.WeakSet[Lineage] = weakref.WeakSet()  # gc'd layers are forgotten by each
        self._lock = threading.Lock()
        self.pool = SandboxPool(self.rt, config.pool_size)
        self._image_pool: SandboxPool | None = None  # started on the first image import
        self._shut = False
        atexit.register(self.shutdown)  # sandboxes die with this process anyway; this also removes cgroups and dirs

    # ---------------------------------------------------------------------------------------- sandboxes

    def create(self, task_or_repo_dir: Any = None, policy: EgressPolicy | None = None) -> str:
        """A new sandbox whose workspace is a copy of the task's repository (empty if None); its id."""
        src = _repo_dir(task_or_repo_dir)
        chain = self.rt.layers.import_dir(src) if src else (EMPTY,)
        return self._start(chain, policy, _Seed(None, Episode()))

    def import_repo(self, repo_dir: Any) -> str:
        """Copy a repository into a layer once and return a snapshot id to fork many sandboxes from."""
        chain = self.rt.layers.import_dir(_repo_dir(repo_dir))
        return self._register_snapshot(chain)

    @property
    def image_pool(self) -> SandboxPool | None:
        """The warm pool of image sandboxes (None until the first image is imported)."""
        return self._image_pool

    def import_image(self, image, workdir: str | None = None, user: str | None = None,
                     env: dict[str, str] | None = None, command: tuple[str, ...] | None = None) -> str:
        """A snapshot id of an image's root filesystem (an `images.Image`; its layers are used in place).

        workdir, user and env override the image's WORKDIR, USER and add to its ENV for sandboxes forked from it.
        `command` (a service of a multi-container task): started at every container start instead of Harbor's
        keep-alive, after the ENTRYPOINT if any (env/profile.py).
        """
        self.rt.add_image(image.layers, image.layer_root, image.uid_base)
        with self._lock:
            if self._image_pool is None:
                size = self.rt.config.image_pool_size
                self._image_pool = SandboxPool(self.rt, self.rt.config.pool_size if size is None else size, image=True)
        snap = self._register_snapshot(tuple(image.layers), pinned=False)
        with self._lock:
            self._profiles[snap] = profile_of(image, workdir, user, env, command)
        return snap

    def fork(self, source: str, policy: EgressPolicy | None = None, resources: Resources | None = None,
             keep_origin: bool = False, net=None) -> str:
        """A new sandbox on a snapshot, or on a sandbox's current state (snapshotting it); its id.

        A fork of a sandbox starts with a copy of its parent's todo list, egress policy and resources.
        `resources` (image sandboxes) sets its CPU quota, memory limit and writable-layer size.
        `keep_origin` (a snapshot taken of a sandbox): the fork's `changes` count from where that sandbox started,
        not from the snapshot (a resumed episode's changes are the whole episode's).
        `net` (image snapshots): a `netns.SharedNet` the sandbox joins (a multi-container task's network); a fork of
        a sandbox joins its parent's.
        """
        with self._lock:
            chain = self._snapshots.get(source)
            profile = self._profiles.get(source)
            record = self._records.get(source)
            origin = self._origins.get(source) if keep_origin else None
            lineage = self._lineages.get(source)
            if chain is not None:
                self.rt.layers.pin(chain)
        if chain is not None:
            return self._start(chain, policy, _Seed(None, Episode(), profile, resources, origin, lineage), net)
        if record is None:
            raise KeyError(f"{source!r} is neither a live sandbox nor a snapshot")
        with record.sandbox.lock:
            chain = self._freeze(record)  # pinned until _start registers the fork
        episode = Episode(todos=[dict(t) for t in record.episode.todos])
        seed = _Seed(source, episode, record.profile, resources or record.resources, lineage=record.lineage)
        return self._start(chain, policy or record.sandbox.policy, seed, record.sandbox.net)

    def snapshot(self, sid: str) -> str:
        """Freeze the sandbox's files as a snapshot id (its later writes do not change the snapshot)."""
        record = self._record(sid)
        with record.sandbox.lock:
            chain = self._freeze(record)
            origin = record.origin
        snap = self._register_snapshot(chain)
        with self._lock:
            self._origins[snap] = origin
            self._lineages[snap] = record.lineage
        if record.profile is not None:
            with self._lock:
                self._profiles[snap] = record.profile
        return snap

    def restore(self, sid: str, snapshot: str) -> None:
        """Return a sandbox's files to a snapshot (its processes are killed first; an image's entrypoint restarts)."""
        record = self._record(sid)
        sbx = record.sandbox
        chain = self._snapshot(snapshot, pin=True)
        with self._lock:
            same_kind = (self._profiles.get(snapshot) is None) == (record.profile is None)
        if not same_kind:
            self.rt.layers.commit(chain)
            raise ValueError(f"snapshot {snapshot!r} and sandbox {sid!r} are not both image (or both workspace) ones")
        try:
            with sbx.lock:
                sbx.sweep()
                sbx.mount(chain, record.resources.storage_bytes)
                record.origin = tuple(chain)
                self._boot(record)
        finally:
            self.rt.layers.commit(chain)
        self._gc()

    def _retire(self, sid: str) -> _Record:
        """Move a live sandbox's record to the closed ones (the newest CLOSED_KEPT stay readable); KeyError if
        `sid` is not live."""
        with self._lock:
            record = self._records.pop(sid, None)
            if record is None:
                raise KeyError(f"no live sandbox {sid!r}")
            self._closed[sid] = record
            while len(self._closed) > CLOSED_KEPT:
                self._closed.popitem(last=False)
        return record

    def close(self, sid: str) -> dict:
        """Kill every process of the sandbox and release it; returns its final episode state."""
        record = self._retire(sid)
        record.sandbox.close()
        self._gc()
        return record.episode.to_dict()

    def delete_snapshot(self, snapshot: str) -> None:
        """Forget a snapshot; its layers are deleted once no sandbox or snapshot uses them."""
        with self._lock:
            if self._snapshots.pop(snapshot, None) is None:
                raise KeyError(f"no snapshot {snapshot!r}")
            self._profiles.pop(snapshot, None)
            self._origins.pop(snapshot, None)
            self._lineages.pop(snapshot, None)
        self._gc()

    # ---------------------------------------------------------------------------------------- tools & state

    def call(self, sid: str, tool: Any, args: Any = None) -> Observation:
        """Run one tool call (args: a dict or the model's raw JSON string); never raises.

        The network requests the sandbox made since the previous call's observation (during this call, or by
        background processes in between) are appended to the observation, one line each with the policy's verdict,
        method, target, status and reason, and listed in `fields["egress"]`: the model sees why its request failed.
        """
        with self._lock:
            record = self._records.get(sid)
        if record is None:
            return Observation.failure("unknown_sandbox", f"no live sandbox {sid!r}")
        with record.sandbox.lock:
            obs = call_tool(self._context(record), tool, args)
            events = record.log.events(record.egress_seen)
            if events:
                record.egress_seen = events[-1]["seq"] + 1
        return with_egress(obs, events)

    def exec(self, sid: str, command: str, timeout_s: float | None = None, user: str | None = None,
             cwd: str | None = None, env: dict[str, str] | None = None) -> dict:
        """Run a command for the host (a verifier, a setup step): not a tool call, not counted in the episode, and
        its timeout is not capped by SandboxLimits.max_timeout_s. Returns the guest's result (exit_code, stdout,
        stderr, timed_out, killed, wall_s, ...); SandboxError if the sandbox is gone.
        """
        record = self._record(sid)
        ctx = self._context(record)
        timeout = timeout_s or self.limits.timeout_s
        with record.sandbox.lock:
            reply = record.sandbox.request(
                "exec", wait_s=timeout + record.sandbox.REPLY_GRACE_S, cmd=command, cwd=cwd or ".",
                env={**ctx.env, **(env or {})}, timeout_s=timeout, limits=ctx.rlimits,
                cpu_budget_s=self.limits.sandbox_cpu_s,
                **({"user": ctx.user if user is None else user} if record.profile is not None else {}))
        if not reply.get("ok"):
            raise SandboxError(f"exec in {sid} failed: {reply.get('message', reply)}")
        return reply

    def put_dir(self, sid: str, src: str | os.PathLike, dest: str, user: str | None = None,
                exclude: tuple[str, ...] = ()) -> None:
        """Copy a host directory (less `exclude`, paths relative to it) into a sandbox at the absolute path dest
        (owned by user; default root in images). Uncompressed tars (transfer.pack_parts), so nothing of the image is
        needed to unpack them; a file that cannot be copied is named in the error."""
        for part in pack_parts(src, exclude):
            self.put_archive(sid, part, dest, user)

    def put_archive(self, sid: str, data: str, dest: str, user: str | None = None) -> None:
        """Unpack a base64 tar (plain or gzipped: transfer.pack_parts, pack_dir) into a sandbox at the absolute path
        dest; SandboxError naming the member that could not be written."""
        record = self._record(sid)
        with record.sandbox.lock:
            reply = record.sandbox.request("put_archive", wait_s=120, dest=dest, data=data,
                                           user="" if user is None else user)
        if not reply.get("ok"):
            raise SandboxError(f"unpacking into {sid}:{dest} failed: {reply.get('message', reply)}")

    def set_user(self, sid: str, user: str | None) -> None:
        """The user later commands and file tools of an image sandbox run as (None: the image's USER)."""
        record = self._record(sid)
        if record.profile is None:
            raise ValueError(f"sandbox {sid} is a workspace sandbox; its user is fixed")
        with record.sandbox.lock:
            record.profile = dataclasses.replace(record.profile, user=record.profile.image_user if user is None
                                                 else user)

    def profile(self, sid: str) -> ImageProfile | None:
        """How an image sandbox runs things (None for a workspace sandbox)."""
        return self._record(sid, closed_ok=True).profile

    def enforcement(self, sid: str) -> dict[str, str]:
        """How each resource limit of a sandbox is enforced on this host (or why it is not)."""
        record = self._record(sid)
        cg, res, lim = self.rt.cgroups, record.resources, self.limits
        memory = res.memory_bytes or lim.sandbox_memory_bytes
        if cg.available:
            mem = f"cgroup memory limit {memory} bytes"
        else:
            mem = f"not enforced per sandbox ({cg.reason}); per process RLIMIT_AS {lim.memory_bytes}"
        if res.cpus is None:
            cpu = "not limited (no cpus given)"
        elif cg.available and not cg.cpu_reason:
            cpu = f"cgroup CPU quota {res.cpus:g} cores"
        else:
            cpu = f"not enforced ({cg.cpu_reason or cg.reason}); CPU seconds budget {lim.sandbox_cpu_s:g}"
        storage = f"tmpfs of {res.storage_bytes or lim.disk_bytes} bytes for the sandbox's writes"
        return {"memory": mem, "cpus": cpu, "storage": storage}

    @staticmethod
    def tools() -> list[dict]:
        """The OpenAI-style function specs of the tools."""
        return tool_specs()

    def set_phase(self, sid: str, phase: str, policy: EgressPolicy | None = None, mirrors: bool = False) -> None:
        """Enter a phase of the sandbox's life ("agent", "verifier"): later egress events carry its label, requests are
        decided by `policy` (None: the sandbox's own policy, the one it was forked with) and, with mirrors=True, URLs
        of the mirror map are answered from it (env/mirrors.py). Events logged before the switch are marked as shown,
        so one phase's requests never appear in a later phase's tool observations."""
        record = self._record(sid)
        with record.sandbox.lock:
            self.rt.proxy.set_phase(sid, phase, policy or record.sandbox.policy, mirrors)
            record.egress_seen = len(record.log)

    def mirror_ca_pem(self) -> str:
        """The certificate of the per-run CA that signs the mirror's https answers (env/tls.py; made on first use)."""
        return self.rt.proxy.ca().pem

    def egress_log(self, sid: str, since: int = 0) -> list[dict]:
        """The sandbox's egress events (allowed and denied) with seq >= since."""
        return self._record(sid, closed_ok=True).log.events(since)

    def changes(self, sid: str) -> WorkspaceChanges:
        """The text files the sandbox changed since it was started (or restored), read from its own layers: its
        upper layer and the layers frozen from it since (env/changes.py). Workspace sandboxes only."""
        record = self._record(sid)
        if record.profile is not None:
            raise ValueError(f"sandbox {sid} is an image sandbox; changes() reads workspace sandboxes only")
        with record.sandbox.lock:
            chain, origin = record.sandbox.chain or (), record.origin
            if chain[len(chain) - len(origin):] != origin:
                raise ValueError(f"sandbox {sid}'s chain {list(chain)} no longer ends in the chain it started on "
                                 f"{list(origin)} (squashed past SandboxConfig.max_layers); its changes are lost")
            own = chain[:len(chain) - len(origin)]
            paths = self.rt.layers.path
            return layer_changes([record.sandbox.upper_dir(), *map(paths, own)], [paths(layer) for layer in origin])

    def todos(self, sid: str) -> list[dict]:
        """The sandbox's current todo list."""
        return [dict(t) for t in self._record(sid, closed_ok=True).episode.todos]

    def episode(self, sid: str) -> dict:
        """Episode state: todos, submitted, summary, call and error counts."""
        return self._record(sid, closed_ok=True).episode.to_dict()

    def set_episode(self, sid: str, state: Mapping[str, Any]) -> None:
        """Replace a live sandbox's episode state by `state` (an `episode(sid)` dict), e.g. a resumed checkpoint's."""
        fields = {f.name for f in dataclasses.fields(Episode)}
        if set(state) != fields:
            raise ValueError(f"episode state has keys {sorted(state)}; expected exactly {sorted(fields)}")
        record = self._record(sid)
        episode = Episode(**copy.deepcopy(dict(state)))
        with record.sandbox.lock:
            record.episode = episode

    def new_episode(self, sid: str) -> dict:
        """Start a fresh episode on a live sandbox (todos, submission and counts reset; files and processes kept),
        as the next step of a multi-step task does; returns the finished episode's state."""
        record = self._record(sid)
        with record.sandbox.lock:
            old, record.episode = record.episode, Episode()
        return old.to_dict()

    def info(self, sid: str) -> dict:
        """Diagnostics: host pid of the sandbox's pid 1, its pid namespace, layer chain, cgroups, liveness."""
        record = self._record(sid)
        sbx = record.sandbox
        return {"sid": sid, "pid": sbx.pid, "pidns": sbx.pidns, "alive": sbx.alive(), "chain": list(sbx.chain or ()),
                "cgroups": list(sbx.cgroup_dirs), "parent": record.parent, "policy": sbx.policy.to_dict(),
                "disk": record.lineage.report()}

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
        if self._image_pool is not None:
            self._image_pool.close()
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

    def _start(self, chain: Chain, policy: EgressPolicy | None, seed: _Seed, net=None) -> str:
        """Take a started sandbox (a fresh one inside `net`, if given), mount chain as its workspace (or root
        filesystem) and register it (in the seed's lineage, else a new one with the resources' budget)."""
        profile = seed.profile
        pool = self.pool if profile is None else self._image_pool
        resources = seed.resources or Resources()
        try:
            if net is not None and profile is None:
                raise ValueError("a shared network (net=) is for image sandboxes; this snapshot is a workspace one")
            if net is not None:
                fresh = Sandbox(self.rt, new_sid(), policy or self.policy, True, net)
                sbx = self.rt.spawner.submit(fresh.start).result()
            else:
                sbx = pool.take(policy or self.policy)
            record = _Record(sbx, seed.episode, self.rt.proxy.log(sbx.sid), seed.parent, profile, resources,
                             tuple(chain if seed.origin is None else seed.origin),
                             lineage=seed.lineage or self._lineage(resources))
            try:
                sbx.mount(chain, record.resources.storage_bytes)
                self._boot(record)
            except Exception:
                sbx.close()
                raise
        except Exception:
            self.rt.layers.commit(chain)
            raise
        with self._lock:
            self._records[sbx.sid] = record
        self.rt.layers.commit(chain)
        return sbx.sid

    def _boot(self, record: _Record) -> None:
        """After a (re)mount of an image sandbox: working directory, limits, then the entrypoint (Harbor's rule)."""
        profile, sbx = record.profile, record.sandbox
        if profile is None:
            return
        reply = sbx.request("configure", workdir=profile.workdir, user=profile.user, create=True)
        if not reply.get("ok"):
            raise SandboxError(f"sandbox {sbx.sid}: {reply.get('message')}")
        res = record.resources
        if sbx.cgroup_dirs and (res.memory_bytes or res.cpus):
            self.rt.cgroups.set_limits(sbx.cgroup_dirs, res.memory_bytes, res.cpus)
        argv = profile.entrypoint_argv()
        if argv:
            ctx = self._context(record)
            reply = sbx.request("spawn", argv=list(argv), env=ctx.env, cwd=".", user=profile.user,
                                limits={**ctx.rlimits, "cpu_s": None}, log="/tmp/entrypoint.log")
            if not reply.get("ok"):
                raise SandboxError(f"sandbox {sbx.sid}: the entrypoint {list(argv)} did not start: "
                                   f"{reply.get('message')}")

    def _context(self, record: _Record) -> ToolContext:
        """What a tool call (or exec) on this sandbox needs: its environment, user, rlimits and path rule."""
        profile, rlimits = record.profile, self.limits.command_rlimits()
        if profile is None:
            return ToolContext(record.sandbox, record.episode, self.limits, self._env, rlimits=rlimits)
        if self.rt.cgroups.available:
            rlimits["memory_bytes"] = None  # the memory cgroup bounds the sandbox; RLIMIT_AS breaks big reservations
        rlimits["open_files"] = None  # inherited (the host's limit), as a container's default is generous
        rlimits["cpu_s"] = None  # only the sandbox's CPU-seconds budget: a container has no per-process CPU limit
        env = profile.command_env(record.sandbox.proxy_port, self.rt.config.hostname, dict(self.rt.config.env))
        if record.sandbox.net is not None:  # the other services are reached directly, never through the proxy
            env["no_proxy"] = env["NO_PROXY"] = ",".join([env["NO_PROXY"], *record.sandbox.net.aliases])
        return ToolContext(record.sandbox, record.episode, self.limits, env, user=profile.user, confined=False,
                           rlimits=rlimits)

    def _lineage(self, resources: Resources) -> Lineage:
        """A new lineage: the resources' disk budget, else lineage_disk_factor x their (or the default) storage."""
        storage = resources.storage_bytes or self.limits.disk_bytes
        lineage = Lineage(resources.disk_budget_bytes or int(self.limits.lineage_disk_factor * storage))
        with self._lock:
            self._every_lineage.add(lineage)
        return lineage

    def disk(self, sid: str) -> dict:
        """The sandbox's lineage disk figures (env/budget.py): budget, bytes its snapshot layers use, layers."""
        return self._record(sid, closed_ok=True).lineage.report()

    def _freeze(self, record: _Record) -> Chain:
        """Freeze a sandbox's upper layer (its lock held) and remount it; the new chain, pinned until committed.
        DiskBudgetExceeded (before anything is copied) if its lineage cannot take the layer."""
        sbx = record.sandbox
        sbx.sweep()
        size = tree_bytes(sbx.upper_dir()) if os.listdir(sbx.upper_dir()) else 0
        if size:
            record.lineage.check(size, f"snapshot of sandbox {sbx.sid}")
        frozen = self.rt.layers.freeze(sbx.upper_dir(), sbx.chain)
        if frozen == sbx.chain:
            self.rt.layers.pin(frozen)
            return frozen
        record.lineage.charge(frozen[0], size)
        chain = frozen
        own = [layer for layer in chain if not layer.startswith("I")]  # snapshot layers (image layers stay shared)
        if len(own) > self.rt.config.max_layers:
            if record.profile is None:
                chain = self.rt.layers.squash(chain, self.rt.mountd)
            else:
                chain = (self.rt.layers.merge(tuple(own)),) + tuple(layer for layer in chain if layer.startswith("I"))
            record.lineage.charge(chain[0], tree_bytes(self.rt.layers.path(chain[0])))
            self.rt.layers.commit(frozen[:1])  # the squashed-away top layer is garbage once unused
        sbx.mount(chain, record.resources.storage_bytes)
        self._boot(record)
        return chain

    def _register_snapshot(self, chain: Chain, pinned: bool = True) -> str:
        """Store a chain under a new snapshot id (dropping the pin its new layers carry, if any)."""
        snap = f"snap-{secrets.token_hex(6)}"
        with self._lock:
            self._snapshots[snap] = chain
        if pinned:
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
            lineages = list(self._every_lineage)
        deleted = set(self.rt.layers.gc(live))
        for lineage in lineages:
            lineage.forget(deleted)
