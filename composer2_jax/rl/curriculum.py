"""The stream of training tasks: weighted sources, each cycled in a seeded shuffled order, resumable by position."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from typing import Any


class Curriculum:
    """Hands out tasks of weighted sources (rl/sources.py): the source of draw p is a seeded choice ∝ weight, then
    the next task of that source's own epoch order (each epoch a fresh seeded permutation). `position` (draws so
    far) is the whole state: a resumed curriculum replays the source choices up to it."""

    def __init__(self, sources: Sequence[tuple[Sequence[Any], float]], seed: int = 0, position: int = 0):
        sources = [(list(t), float(w)) for t, w in sources]
        empty = [i for i, (t, _) in enumerate(sources) if not t]
        if not sources or empty:
            raise ValueError(f"the curriculum needs sources with tasks; sources {empty} of {len(sources)} are empty")
        bad = [w for _, w in sources if not w > 0]
        if bad:
            raise ValueError(f"source weights {bad}; expected positive numbers")
        self.tasks, self.weights, self.seed = [t for t, _ in sources], [w for _, w in sources], seed
        self.position = 0
        self._drawn = [0] * len(sources)
        self._orders: dict[int, tuple[int, list[int]]] = {}  # source -> (epoch, its permutation)
        self._lock = threading.Lock()
        for _ in range(position):
            self._advance()

    def _order(self, s: int, epoch: int) -> list[int]:
        """The permutation of source s in one epoch (one source: the seeds of the single-list task order)."""
        cached = self._orders.get(s)
        if cached is None or cached[0] != epoch:
            order = list(range(len(self.tasks[s])))
            random.Random(f"{self.seed}-{epoch}" if len(self.tasks) == 1 else f"{self.seed}-{s}-{epoch}").shuffle(order)
            self._orders[s] = cached = (epoch, order)
        return cached[1]

    def _advance(self) -> tuple[int, int]:
        """(source, index into its tasks) of the next draw; moves the position."""
        p = self.position
        s = 0 if len(self.tasks) == 1 else random.Random(f"{self.seed}-source-{p}").choices(
            range(len(self.tasks)), self.weights)[0]
        epoch, i = divmod(self._drawn[s], len(self.tasks[s]))
        self._drawn[s] += 1
        self.position += 1
        return s, self._order(s, epoch)[i]

    def next(self) -> Any:
        """The next task."""
        with self._lock:
            s, i = self._advance()
        return self.tasks[s][i]


class TaskCurriculum(Curriculum):
    """One task list cycled epoch by epoch (a curriculum of one source)."""

    def __init__(self, tasks: Sequence[Any], seed: int = 0, position: int = 0):
        if not tasks:
            raise ValueError("TaskCurriculum needs at least one task")
        super().__init__([(tasks, 1.0)], seed, position)
