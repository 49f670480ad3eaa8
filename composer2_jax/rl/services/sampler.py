"""The stream of training tasks: a fixed task list cycled in a seeded shuffled order, resumable by position."""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence

from composer2_jax.rl.tasks import CodingTask


class TaskSampler:
    """Hands out tasks epoch by epoch (each epoch a fresh seeded permutation); `position` is its whole state."""

    def __init__(self, tasks: Sequence[CodingTask], seed: int = 0, position: int = 0):
        if not tasks:
            raise ValueError("TaskSampler needs at least one task")
        self.tasks, self.seed, self.position = list(tasks), seed, position
        self._lock = threading.Lock()

    def _order(self, epoch: int) -> list[int]:
        """The permutation of one epoch."""
        order = list(range(len(self.tasks)))
        random.Random(f"{self.seed}-{epoch}").shuffle(order)
        return order

    def next(self) -> CodingTask:
        """The next task."""
        with self._lock:
            epoch, i = divmod(self.position, len(self.tasks))
            self.position += 1
        return self.tasks[self._order(epoch)[i]]
