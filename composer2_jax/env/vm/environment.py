"""`VmEnvironment`: the `Environment` API (env/environment.py) with every sandbox a VM (`SandboxConfig.backend="vm"`).

    env = Environment(config=SandboxConfig(backend="vm"))   # an Environment whose sandboxes are VMs
    snap = env.import_image(image)                           # the image's layers as an ext4 root disk (cached)
    sid = env.fork(snap)                                     # a cold boot; the entrypoint starts as in a container
    env.call(sid, "run_terminal_cmd", {"command": "python -m http.server 8000 &"})
    warm = env.snapshot(sid)                                 # memory + devices + a frozen disk layer
    kids = [env.fork(warm) for _ in range(4)]                # each resumes the server mid-flight, own disk overlay
    env.restore(sid, warm)                                   # processes and files back as they were

Tool calls, exec, put_archive, episode state, egress logs and checkpoints are the Environment's own code; only how
a sandbox starts, snapshots, forks, restores and closes differs. Snapshots hold processes: a fork or a restore does
not restart the entrypoint (a cold boot from an image does).

    sid = env.create(repo)   # a workspace sandbox: a fork of the warm workspace VM, the repo in /workspace, uid 1000

Workspace sandboxes boot the workspace image (env/vm/workspace_image; `set_workspace_image`) once per network
setting, confine the guest to /workspace and snapshot it; each `create` forks from that snapshot (docs/env.md).
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import shutil
import threading

from composer2_jax.env.environment import BACKENDS, Environment, _Record, _repo_dir
from composer2_jax.env.profile import profile_of
from composer2_jax.env.sandbox import SandboxError
from composer2_jax.env.sandbox_config import Resources
from composer2_jax.env.tools import Episode
from composer2_jax.env.vm import assets
from composer2_jax.env.vm.jail import Jail
from composer2_jax.env.vm.sandbox import VmSandbox, VmSnapshot
from composer2_jax.env.vm.vmm import VmSpec, choose

MiB = 1 << 20
WORKSPACE = "/workspace"
WORKSPACE_USER = "1000:1000"  # commands and file tools of a workspace sandbox run as this uid:gid (as under bwrap)
WORKSPACE_PREFIX = "vm-workspace:"  # ImageProfile.image of a workspace sandbox: the prefix, then the image key
WORKSPACE_IMAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workspace_image")


def is_workspace(profile) -> bool:
    """True for the profile of a VM workspace sandbox (`VmEnvironment.create`)."""
    return profile is not None and profile.image.startswith(WORKSPACE_PREFIX)


def _build_workspace_image():
    """The default workspace image (env/vm/workspace_image/Dockerfile), built (or loaded from the cache)."""
    from composer2_jax.env.images import ImageBuilder

    builder = ImageBuilder()
    try:
        return builder.build(WORKSPACE_IMAGE)
    finally:
        builder.close()


class VmEnvironment(Environment):
    """See the module docstring; made by `Environment(...)` when its config's backend is "vm"."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.pool.close()  # the bwrap warm pool (pool_size) is of no use here: every sandbox is a VM
        cfg = self.rt.config
        self.vmm = choose(cfg.vmm)
        # pids: as a bwrap sandbox's cgroup (env/sandbox.py), so root in the guest, whom RLIMIT_NPROC does not bind,
        # cannot fork the guest to a standstill
        self.spec = VmSpec(accel=self.vmm.accel, memory_mib=cfg.vm_memory_mib, cpus=cfg.vm_cpus,
                           hostname=cfg.hostname, pids=self.limits.processes + 16,
                           boot_timeout_s=cfg.vm_boot_timeout_s)
        # the confined QEMU (uid cfg.vm_uid, env/vm/jail.py) must reach its own files: they live in the public dir
        # (searchable, not listable), each sandbox's in its own dirs, never in the root-only base dir
        self.vm_dir = os.path.join(self.rt.public, "vm")
        os.makedirs(self.vm_dir, exist_ok=True)
        os.chmod(self.vm_dir, 0o711)
        self.jail = Jail(cfg, self.vm_dir, self.rt.cgroups)
        for asset in (assets.kernel_dir, assets.initramfs, assets.runtime_disk):
            asset()  # fetched or built once per machine, before the first sandbox needs them
        self._ws_lock = threading.Lock()  # guards the workspace image and its warm snapshots (one boot each)
        self._ws_image = None  # the image workspace sandboxes boot (None: WORKSPACE_IMAGE, built on first use)
        self._ws_bases: dict[bool, str] = {}  # has a network device -> warm workspace snapshot id

    # ------------------------------------------------------------------------------------------ snapshots

    def create(self, task_or_repo_dir=None, policy=None) -> str:
        """A workspace sandbox: a VM forked from the warm workspace snapshot (`_workspace_base`) with the task's
        repository copied into /workspace (owned by uid 1000, as every command and file tool runs); its id."""
        src = _repo_dir(task_or_repo_dir)
        policy = policy or self.policy
        sid = self.fork(self._workspace_base(policy), policy)
        if src:
            try:
                self.put_dir(sid, src, WORKSPACE, user=WORKSPACE_USER)
            except Exception:
                self.close(sid)
                raise
        return sid

    def import_repo(self, repo_dir) -> str:
        """A snapshot (memory included) of a fresh workspace sandbox holding the repository, to fork many from."""
        sid = self.create(repo_dir)
        try:
            return self.snapshot(sid)
        finally:
            self.close(sid)

    def set_workspace_image(self, image) -> None:
        """The image (an `images.Image`) workspace sandboxes boot; default: env/vm/workspace_image, built on first
        use. Later `create` calls boot it once (per network setting) and fork from its memory snapshot."""
        with self._ws_lock:
            self._ws_image, self._ws_bases = image, {}

    def import_image(self, image, workdir=None, user=None, env=None) -> str:
        """A snapshot id of an image: its root disk (built from its layers once per image key), booted on fork."""
        disk = assets.image_disk(image)
        snap = self._new_snapshot(VmSnapshot(disk, "raw", self.spec, network=False))
        with self._lock:
            self._profiles[snap] = profile_of(image, workdir, user, env)
        return snap

    def snapshot(self, sid: str) -> str:
        """Freeze the VM's memory, devices and disk as a snapshot id; the VM runs on unchanged."""
        record = self._record(sid)
        state = os.path.join(record.sandbox.disk_dir, f"state-{secrets.token_hex(6)}")
        with record.sandbox.lock:
            vsnap = record.sandbox.snapshot(state)
        snap = self._new_snapshot(vsnap)
        with self._lock:
            self._origins[snap] = record.origin
            if record.profile is not None:
                self._profiles[snap] = record.profile
        return snap

    def delete_snapshot(self, snapshot: str) -> None:
        """Forget a snapshot and delete its memory file (its disk layer stays while later layers stand on it)."""
        with self._lock:
            vsnap = self._snapshots.pop(snapshot, None)
            if vsnap is None:
                raise KeyError(f"no snapshot {snapshot!r}")
            self._profiles.pop(snapshot, None)
            self._origins.pop(snapshot, None)
        if vsnap.state is not None and os.path.exists(vsnap.state):
            os.unlink(vsnap.state)

    # ------------------------------------------------------------------------------------------ sandboxes

    def fork(self, source: str, policy=None, resources: Resources | None = None, keep_origin: bool = False) -> str:
        """A new VM on a snapshot (a cold boot for an image; a resume for a VM's snapshot), or on a live sandbox's
        current state (snapshotting it first); its id. `resources.memory_bytes` sizes a cold-booted VM's RAM."""
        with self._lock:
            vsnap, record = self._snapshots.get(source), self._records.get(source)
            profile = self._profiles.get(source)
            origin = self._origins.get(source) if keep_origin else None
        if vsnap is None and record is None:
            raise KeyError(f"{source!r} is neither a live sandbox nor a snapshot")
        if vsnap is not None:
            return self._start_vm(vsnap, policy, None, Episode(), profile, resources or Resources(), origin)
        snap = self.snapshot(source)  # a private one: its memory file is gone once the fork has loaded it
        episode = Episode(todos=[dict(t) for t in record.episode.todos])
        try:
            return self._start_vm(self._snapshots[snap], policy or record.sandbox.policy, source, episode,
                                  record.profile, resources or record.resources, None)
        finally:
            self.delete_snapshot(snap)

    def restore(self, sid: str, snapshot: str) -> None:
        """Return a VM to a snapshot: files, memory and processes (an image snapshot: a cold boot, its entrypoint)."""
        record = self._record(sid)
        with self._lock:
            vsnap = self._snapshots.get(snapshot)
        if vsnap is None:
            raise KeyError(f"no snapshot {snapshot!r}")
        with record.sandbox.lock:
            record.sandbox.start(vsnap, self._spec_for(record.resources))
            record.origin = (snapshot,)
            if vsnap.state is None:
                self._boot(record)

    def close(self, sid: str) -> dict:
        """Kill the VM and release it; returns its final episode state."""
        record = self._retire(sid)
        record.sandbox.close()
        self.rt.proxy.remove(sid)
        shutil.rmtree(record.sandbox.workdir, ignore_errors=True)  # sockets and logs (its disks stay for snapshots)
        return record.episode.to_dict()

    def changes(self, sid: str):
        """Refused: VM sandboxes are image sandboxes (see Environment.changes)."""
        raise ValueError(f"sandbox {sid} is a VM (image) sandbox; changes() reads workspace sandboxes only")

    def enforcement(self, sid: str) -> dict[str, str]:
        """How each limit of a VM is enforced: its RAM, its vCPUs and its own disk overlay."""
        record = self._record(sid)
        spec = record.sandbox.spec
        return {"memory": f"VM RAM {spec.memory_mib} MiB (the guest kernel's OOM killer acts inside it)",
                "cpus": f"{spec.cpus} vCPU(s) ({self.vmm.kind} with {self.vmm.accel})",
                "storage": "a qcow2 overlay on the image's ext4 root disk (the guest's free space bounds it)"}

    def info(self, sid: str) -> dict:
        """Diagnostics: QEMU's host pid, the monitor, liveness, parent and policy."""
        record = self._record(sid)
        sbx = record.sandbox
        cgroups = list(sbx.vm.cgroup_dirs) if sbx.vm is not None else []  # QEMU's own (jail.py)
        return {"sid": sid, "pid": sbx.pid, "pidns": None, "alive": sbx.alive(), "chain": [], "cgroups": cgroups,
                "parent": record.parent, "policy": sbx.policy.to_dict(), "vmm": dataclasses.asdict(self.vmm),
                "network": sbx.network}

    # ------------------------------------------------------------------------------------------ internals

    def _spec_for(self, resources: Resources) -> VmSpec:
        """The machine of a cold boot: the environment's, with RAM from resources.memory_bytes when given."""
        if resources.memory_bytes:
            return dataclasses.replace(self.spec, memory_mib=max(128, int(resources.memory_bytes) // MiB))
        return self.spec

    def _new_snapshot(self, vsnap: VmSnapshot) -> str:
        """Register a VM state under a new snapshot id."""
        snap = f"snap-{secrets.token_hex(6)}"
        with self._lock:
            self._snapshots[snap] = vsnap
        return snap

    def _start_vm(self, vsnap: VmSnapshot, policy, parent, episode: Episode, profile, resources: Resources,
                  origin) -> str:
        """Start a VM on a snapshot and register it (a cold boot also runs `_boot`: workdir and entrypoint)."""
        sid = f"vm-{secrets.token_hex(6)}"
        policy = policy or self.policy
        sock = os.path.join(self.rt.egress_dir, f"{sid}.sock")
        self.rt.proxy.add(sid, sock, policy, self.jail.uid, self.jail.gid)
        sbx = VmSandbox(sid, policy, os.path.join(self.vm_dir, sid), os.path.join(self.vm_dir, "disks", sid), sock,
                        self.jail)
        record = _Record(sbx, episode, self.rt.proxy.log(sid), parent, profile, resources, tuple(origin or ()))
        try:
            sbx.start(vsnap, self._spec_for(resources))
            if vsnap.state is None:
                self._boot(record)
        except Exception:
            sbx.close()
            self.rt.proxy.remove(sid)
            raise
        with self._lock:
            self._records[sid] = record
        return sid

    def _workspace_base(self, policy) -> str:
        """The warm snapshot workspace sandboxes fork from: the workspace image booted once, /workspace made (uid
        1000) and the guest confined to it; one per network setting (a VM has a network device iff its cold boot's
        policy allows hosts, and a resumed VM keeps the device it had)."""
        network = bool(policy.allow_hosts)
        with self._ws_lock:
            if network not in self._ws_bases:
                if self._ws_image is None:
                    self._ws_image = _build_workspace_image()
                self._ws_bases[network] = self._boot_workspace(self._ws_image, policy)
            return self._ws_bases[network]

    def _boot_workspace(self, image, policy) -> str:
        """Cold-boot the workspace image, confine the guest to /workspace, snapshot it; the snapshot's id."""
        profile = dataclasses.replace(profile_of(image, WORKSPACE, WORKSPACE_USER, {"HOME": WORKSPACE}),
                                      image=f"{WORKSPACE_PREFIX}{image.key}", entrypoint=(), command=())
        snap = self._new_snapshot(VmSnapshot(assets.image_disk(image), "raw", self.spec, network=False))
        with self._lock:
            self._profiles[snap] = profile
        sid = self.fork(snap, policy)
        try:
            reply = self._record(sid).sandbox.request("configure", workdir=WORKSPACE, user=WORKSPACE_USER,
                                                      create=True, confined=True)
            if not reply.get("ok"):
                raise SandboxError(f"confining the workspace VM {sid} failed: {reply.get('message', reply)}")
            return self.snapshot(sid)
        finally:
            self.close(sid)
            self.delete_snapshot(snap)

    def _context(self, record):
        """Image sandboxes: the Environment's; workspace sandboxes: paths confined to /workspace and every
        per-command rlimit (processes, memory, CPU, files) as in a bwrap workspace sandbox, as uid 1000."""
        ctx = super()._context(record)
        if is_workspace(record.profile):
            ctx = dataclasses.replace(ctx, confined=True, rlimits=self.limits.command_rlimits())
        return ctx

    def _gc(self) -> None:
        """Nothing to collect between calls: disk layers live until shutdown, memory files until delete_snapshot."""

    def _freeze(self, record):
        """Not used by VMs (snapshots are `VmSandbox.snapshot`)."""
        raise SandboxError(f"sandbox {record.sandbox.sid} is a VM; its snapshots are memory snapshots")


BACKENDS["vm"] = VmEnvironment
