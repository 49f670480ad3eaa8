"""Per-sandbox memory and process limits through cgroups (v2, or v1 memory + pids), when the host allows it.

rlimits bind each process; a cgroup binds the sandbox as a whole (a fork bomb of small allocations, tmpfs
pages, kernel memory). Groups are created next to this process's own group, under one parent named after
this process, and removed at close. Where no writable hierarchy exists (some containers), `available` is
False and `reason` says why: the per-process rlimits still hold.
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
        self.parents: dict[str, str] = {}  # controller ("unified", "memory", "pids") -> our parent group
        self.reason = ""
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
            else:
                _write(os.path.join(path, "pids.max"), str(pids))
        return dirs

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
