"""Bounded staleness: AReaL's admission control on rollout submission, and the consumption-side check.

Versions: the trainer publishes version t after its t-th update (the starting weights are version 0), and batch t
(its (t+1)-th update) is consumed at version t. A sample generated with version v may be consumed at t only if
t − v ≤ η. Admission (Fu et al. 2025, AReaL §5): with G groups per batch, a new group may start only while

    admitted groups (consumed + in flight + buffered, dropped ones excluded) < (v_now + η + 1) · G,

so in-flight work never runs more than η versions ahead of the trainer. η = 0 is the synchronous loop: batch t is
generated entirely with version t while the trainer waits. A group overtaken by faster ones can still be consumed
late; `is_fresh` checks every group when it is consumed and stale ones are dropped (their slots return).
"""

from __future__ import annotations

import threading


class StalenessGate:
    """Admission control: `admit(version)` hands out group slots up to (version + η + 1)·G."""

    def __init__(self, eta: int, groups_per_batch: int, admitted: int = 0):
        if eta < 0 or groups_per_batch < 1:
            raise ValueError(f"eta={eta}, groups_per_batch={groups_per_batch}; expected eta ≥ 0 and G ≥ 1")
        self.eta, self.groups_per_batch = eta, groups_per_batch
        self._admitted = admitted  # slots handed out and not released
        self._issued = admitted  # admission indices handed out (never reused: they order the groups)
        self._cond = threading.Condition()

    @property
    def admitted(self) -> int:
        with self._cond:
            return self._admitted

    def capacity(self, version: int) -> int:
        """How many groups may have been admitted by the time the trainer is at `version`."""
        return (version + self.eta + 1) * self.groups_per_batch

    def try_admit(self, version: int) -> int | None:
        """A new group's admission index, or None when the bound is reached."""
        with self._cond:
            if self._admitted >= self.capacity(version):
                return None
            self._admitted += 1
            self._issued += 1
            return self._issued - 1

    def admit(self, version_fn, stop: threading.Event, timeout_s: float = 0.05) -> int | None:
        """Block until a slot opens (re-reading `version_fn()`), or None once `stop` is set."""
        while not stop.is_set():
            index = self.try_admit(version_fn())
            if index is not None:
                return index
            with self._cond:
                self._cond.wait(timeout_s)
        return None

    def release(self, n: int = 1) -> None:
        """Return the slots of dropped groups (so the trainer is never left waiting for them)."""
        with self._cond:
            self._admitted -= n
            self._cond.notify_all()

    def notify(self) -> None:
        """Wake waiting admitters (a new version was published)."""
        with self._cond:
            self._cond.notify_all()


def is_fresh(sample_version: int, trainer_version: int, eta: int) -> bool:
    """The staleness bound: a sample of version v may train version t iff t − v ≤ η."""
    return trainer_version - sample_version <= eta
