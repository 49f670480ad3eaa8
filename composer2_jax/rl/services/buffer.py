"""The buffer between environment workers and the trainer: finished groups wait here, oldest first.

`take` hands the trainer the G oldest-admitted finished groups that still satisfy the staleness bound; groups
that became too stale while waiting are dropped (counted, their admission slots released).
"""

from __future__ import annotations

import threading
import time

from composer2_jax.rl.records import Counters, GroupRecord
from composer2_jax.rl.services.staleness import StalenessGate, is_fresh


class GroupBuffer:
    """Thread-safe store of finished groups; `take` blocks until enough fresh ones are present."""

    def __init__(self, gate: StalenessGate, counters: Counters):
        self.gate, self.counters = gate, counters
        self._groups: list[GroupRecord] = []
        self._cond = threading.Condition()

    def put(self, group: GroupRecord) -> None:
        """Add a finished group."""
        with self._cond:
            self._groups.append(group)
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._groups)

    def _drop_stale(self, version: int) -> None:
        """Remove groups a trainer at `version` may not consume (lock held)."""
        fresh = [g for g in self._groups if is_fresh(g.min_version, version, self.gate.eta)]
        stale = len(self._groups) - len(fresh)
        if stale:
            self._groups = fresh
            self.counters.add("groups_stale_dropped", stale)
            self.gate.release(stale)

    def take(self, n: int, version: int, stop: threading.Event, timeout_s: float | None = None
             ) -> list[GroupRecord] | None:
        """The n oldest-admitted fresh groups; None if `stop` is set or `timeout_s` passes first."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            while True:
                self._drop_stale(version)
                if len(self._groups) >= n:
                    self._groups.sort(key=lambda g: g.group_id)
                    out, self._groups = self._groups[:n], self._groups[n:]
                    return out
                if stop.is_set() or (deadline is not None and time.monotonic() >= deadline):
                    return None
                self._cond.wait(0.05)
