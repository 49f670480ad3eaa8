"""One disk budget per sandbox lineage: what snapshots, checkpoints and forks of one sandbox add to the layer store.

A lineage starts with a sandbox forked from an imported image or repository (or created); every snapshot of it,
every fork of it or of one of its snapshots, and their snapshots, belong to it. Each frozen layer they add is
charged to the lineage by its size on disk (`du`-style: allocated blocks, hard links once) until gc deletes the
layer. A snapshot that would take the lineage past its budget is refused before anything is copied, with
`DiskBudgetExceeded` naming the budget, the usage and the layer's size. The writable layer itself is bounded by
the storage limit (its tmpfs); the budget bounds what freezing it again and again leaves on the host's disk.
"""

from __future__ import annotations

import os
import secrets
import threading


class DiskBudgetExceeded(RuntimeError):
    """A snapshot would take a sandbox lineage's layers past its disk budget; the message names both figures."""


def tree_bytes(path: str) -> int:
    """Bytes a directory tree occupies on disk (allocated blocks; each hard-linked inode once; no link followed)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, _, filenames in os.walk(path):
        for full in [dirpath, *(os.path.join(dirpath, n) for n in filenames)]:
            try:
                st = os.lstat(full)
            except FileNotFoundError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


class Lineage:
    """The layers one sandbox lineage added to the layer store, against its budget. Thread-safe."""

    def __init__(self, budget_bytes: int):
        if budget_bytes <= 0:
            raise ValueError(f"disk budget {budget_bytes!r}; expected a positive number of bytes")
        self.id = f"lineage-{secrets.token_hex(4)}"
        self.budget_bytes = budget_bytes
        self._layers: dict[str, int] = {}
        self._lock = threading.Lock()
        self.refused = 0  # snapshots refused for the budget
        self.added_bytes = 0  # every layer ever charged (the lineage's growth of the store, gc'd layers included)

    @property
    def used_bytes(self) -> int:
        """Bytes of this lineage's layers still in the store."""
        with self._lock:
            return sum(self._layers.values())

    def check(self, adding: int, what: str) -> None:
        """DiskBudgetExceeded if `adding` more bytes would pass the budget (nothing is charged)."""
        with self._lock:
            used = sum(self._layers.values())
            if used + adding > self.budget_bytes:
                self.refused += 1
                raise DiskBudgetExceeded(
                    f"{what}: disk budget of sandbox lineage {self.id} exceeded: {used} bytes used by its snapshot "
                    f"layers + {adding} bytes to freeze > budget {self.budget_bytes} bytes (Resources.disk_budget_"
                    f"bytes, default SandboxLimits.lineage_disk_factor x the storage limit); delete snapshots of "
                    f"this lineage or raise the budget")

    def charge(self, layer: str, size: int) -> None:
        """Record a new layer of this lineage."""
        with self._lock:
            self._layers[layer] = size
            self.added_bytes += size

    def forget(self, deleted: set[str]) -> None:
        """Layers gc deleted no longer count."""
        with self._lock:
            for layer in deleted & set(self._layers):
                del self._layers[layer]

    def report(self) -> dict:
        """JSON-ready figures: id, budget, bytes used now, bytes ever added, live layer count, refused snapshots."""
        with self._lock:
            return {"lineage": self.id, "budget_bytes": self.budget_bytes, "used_bytes": sum(self._layers.values()),
                    "added_bytes": self.added_bytes, "layers": len(self._layers), "refused": self.refused}
