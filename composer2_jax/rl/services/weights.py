"""Versioned weight publication: the trainer publishes (version, params, router biases); rollout workers pull.

Version t is the policy after t trainer updates (the starting weights are version 0). Publishing keeps only the
newest version; a reader that wants a specific one waits for it. Published trees are never mutated afterwards
(the trainer's update makes new arrays), so readers may keep using an older version while a newer one lands —
that is what lets an episode finish its current turn on version t and pick up t + 1 for the next.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any


@dataclasses.dataclass(frozen=True)
class Weights:
    """One published policy."""

    version: int
    params: Any
    router_state: Any


class WeightStore:
    """The newest published Weights; thread-safe."""

    def __init__(self, initial: Weights | None = None):
        self._weights = initial
        self._cond = threading.Condition()

    @property
    def version(self) -> int:
        """Newest published version (−1 before the first publication)."""
        with self._cond:
            return -1 if self._weights is None else self._weights.version

    def publish(self, weights: Weights) -> None:
        """Make `weights` the newest; versions must increase."""
        with self._cond:
            if self._weights is not None and weights.version <= self._weights.version:
                raise ValueError(f"published version {weights.version} does not exceed the current "
                                 f"{self._weights.version}")
            self._weights = weights
            self._cond.notify_all()

    def latest(self) -> Weights:
        """The newest Weights (RuntimeError before the first publication)."""
        with self._cond:
            if self._weights is None:
                raise RuntimeError("no weights were published yet; the trainer publishes version 0 at start-up")
            return self._weights

    def wait_for(self, version: int, timeout_s: float | None = None) -> Weights | None:
        """The newest Weights once its version is ≥ `version`, or None after `timeout_s`."""
        with self._cond:
            ok = self._cond.wait_for(lambda: self._weights is not None and self._weights.version >= version,
                                     timeout_s)
            return self._weights if ok else None
