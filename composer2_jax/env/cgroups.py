"""Per-sandbox memory, process and CPU limits through cgroups (v2, or v1 memory + pids + cpu), when the host allows it.

rlimits bind each process; a cgroup binds the sandbox as a whole (a fork bomb of small allocations, tmpfs
pages, kernel memory). Groups are created next to this process's own group, under one parent named after
this process, and removed at close. Where no writable hierarchy exists (some containers), `available` is
False and `reason` says why: the per-process rlimits still hold. The CPU controller is optional: where it is
missing `cpu_reason` says so and a CPU quota is reported as not enforced.
"""

from __future__ import annotations

import errno
import os
import re
import time

ROOT = "/sys/fs/cgroup"
_TAG = re.compile(r"composer2-env-(\d+)$")


def _own_path(controller: str | None) -> str:
    """This process's cgroup path for a v1 controller, or the v2 path when controller is None."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, names, path = line.rstrip("\n").split(":", 2)
            if (controller is None and names == "") or (controller and controller in names.split(",")):
                return path
    raise FileNotFoundError(f"no cgroup entry for {controller or 'v2'} in /proc/self/cgroup")


def _remove_stale(container: str) -> None:
    """Remove groups left by environments whose process died without closing (their sandboxes died with it)."""
    for name in os.listdir(container):
        match = _TAG.match(name)
        if not match or os.path.exists(f"/proc/{match.group(1)}"):
            continue
        parent = os.path.join(container, name)
        for child in os.listdir(parent):
            if os.path.isdir(os.path.join(parent, child)):
                try:
                    os.rmdir(os.path.join(parent, child))
                except OSError:
                    pass
        try:
            os.rmdir(parent)
        except OSError:
            pass


def _write(path: str, value: str) -> None:
    """Write a cgroup control file."""
    with open(path, "w") as f:
        f.write(value)


class Cgroups:
    """Creates, fills and removes one cgroup per sandbox with memory and pids limits."""

    def __init__(self, root: str = ROOT, tag: str | None = None):
        self.root, self.tag = root, tag or f"composer2-env-{os.getpid()}"
        self.parents: dict[str, str] = {}  # controller ("unified", "memory", "pids", "cpu") -> our parent group
        self.reason = ""
        self.cpu_reason = ""  # why CPU quotas cannot be enforced ("" when they can)
        try:
            self._setup()
        except OSError as e:
            self.reason = f"cgroups unavailable ({e}); per-sandbox memory is bounded only by per-process rlimits"
            self.close()
            self.parents = {}

    @property
    def available(self) -> bool:
        """True when sandboxes get a memory and pids cgroup."""
        return bool(self.parents)

    def _setup(self) -> None:
        """Find a writable hierarchy and create our parent group in it."""
        if os.path.exists(os.path.join(self.root, "cgroup.controllers")):
            own = _own_path(None).lstrip("/")
            base = os.path.join(self.root, os.path.dirname(own)) if own else self.root
            if not own:
                _write(os.path.join(self.root, "cgroup.subtree_control"), "+memory +pids")
            _remove_stale(base)
            parent = os.path.join(base, self.tag)
            os.makedirs(parent, exist_ok=True)
            self.parents["unified"] = parent
            _write(os.path.join(parent, "cgroup.subtree_control"), "+memory +pids")
            try:
                _write(os.path.join(parent, "cgroup.subtree_control"), "+cpu")
            except OSError as e:
                self.cpu_reason = f"the cpu controller cannot be enabled under {parent} ({e})"
            return
        for controller in ("memory", "pids"):
            mount = os.path.join(self.root, controller)
            if not os.path.isdir(mount):
                raise FileNotFoundError(errno.ENOENT, f"no cgroup v1 {controller} hierarchy at {mount}")
            container = os.path.join(mount, _own_path(controller).lstrip("/"))
            _remove_stale(container)
            parent = os.path.join(container, self.tag)
            os.makedirs(parent, exist_ok=True)
            self.parents[controller] = parent
        try:
            container = os.path.join(self.root, "cpu", _own_path("cpu").lstrip("/"))
            _remove_stale(container)
            parent = os.path.join(container, self.tag)
            os.makedirs(parent, exist_ok=True)
            self.parents["cpu"] = parent
        except OSError as e:
            self.cpu_reason = f"no writable cgroup v1 cpu hierarchy ({e})"

    def create(self, name: str, memory_bytes: int, pids: int) -> list[str]:
        """Make the groups of one sandbox; returns their dirs (empty when unavailable)."""
        dirs = []
        for controller, parent in self.parents.items():
            path = os.path.join(parent, name)
            os.mkdir(path)
            dirs.append(path)
            if controller == "unified":
                _write(os.path.join(path, "memory.max"), str(memory_bytes))
                _write(os.path.join(path, "pids.max"), str(pids))
                if os.path.exists(os.path.join(path, "memory.swap.max")):
                    _write(os.path.join(path, "memory.swap.max"), "0")
            elif controller == "memory":
                _write(os.path.join(path, "memory.limit_in_bytes"), str(memory_bytes))
            elif controller == "pids":
                _write(os.path.join(path, "pids.max"), str(pids))
        return dirs

    def set_limits(self, dirs: list[str], memory_bytes: int | None = None, cpus: float | None = None,
                   period_us: int = 100_000) -> None:
        """Change a sandbox's memory limit and CPU quota (cpus cores per period; None leaves a limit as it is)."""
        for path in dirs:
            controller = next(c for c, parent in self.parents.items() if path.startswith(parent + "/"))
            if memory_bytes is not None and controller == "unified":
                _write(os.path.join(path, "memory.max"), str(memory_bytes))
            elif memory_bytes is not None and controller == "memory":
                _write(os.path.join(path, "memory.limit_in_bytes"), str(memory_bytes))
            if cpus is not None and controller == "unified" and not self.cpu_reason:
                _write(os.path.join(path, "cpu.max"), f"{max(1000, int(cpus * period_us))} {period_us}")
            elif cpus is not None and controller == "cpu":
                _write(os.path.join(path, "cpu.cfs_period_us"), str(period_us))
                _write(os.path.join(path, "cpu.cfs_quota_us"), str(max(1000, int(cpus * period_us))))

    @staticmethod
    def attach(dirs: list[str], pid: int) -> None:
        """Move a process (and so its future children) into the groups."""
        for path in dirs:
            _write(os.path.join(path, "cgroup.procs"), str(pid))

    @staticmethod
    def remove(dirs: list[str], timeout_s: float = 5.0) -> None:
        """Remove the groups once their processes are gone (retrying while the kernel finishes exits)."""
        deadline = time.monotonic() + timeout_s
        for path in dirs:
            while True:
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError as e:
                    if e.errno != errno.EBUSY or time.monotonic() > deadline:
                        raise OSError(e.errno, f"cannot remove cgroup {path}: {e.strerror}") from None
                    time.sleep(0.01)

    def close(self) -> None:
        """Remove our parent groups (their children must be gone)."""
        for parent in self.parents.values():
            try:
                os.rmdir(parent)
            except OSError:
                pass
