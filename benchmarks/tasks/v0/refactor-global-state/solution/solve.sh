#!/usr/bin/env bash
set -euo pipefail
cat > telemetry/metrics.py <<'PY'
"""Counters and timings: a `Registry` per component, and module-level functions on the shared `DEFAULT`."""

import copy


class Registry:
    """Counters and timings of one component."""

    def __init__(self):
        self._counters = {}
        self._timings = {}

    def incr(self, name, by=1):
        """Add `by` to counter `name` (created at 0); returns the new value."""
        self._counters[name] = self._counters.get(name, 0) + by
        return self._counters[name]

    def get(self, name):
        """Current value of a counter (0 if never incremented)."""
        return self._counters.get(name, 0)

    def observe(self, name, seconds):
        """Record one duration for timing `name`."""
        if seconds < 0:
            raise ValueError(f"negative duration {seconds} for {name!r}")
        self._timings.setdefault(name, []).append(float(seconds))

    def timings(self, name):
        """(count, total, max) of the durations recorded for `name`."""
        values = self._timings.get(name, [])
        return len(values), sum(values), max(values, default=0.0)

    def snapshot(self):
        """A deep copy of everything: {"counters": {...}, "timings": {name: [durations]}}."""
        return {"counters": copy.deepcopy(self._counters), "timings": copy.deepcopy(self._timings)}

    def reset(self):
        """Forget everything."""
        self._counters = {}
        self._timings = {}


DEFAULT = Registry()


def incr(name, by=1):
    return DEFAULT.incr(name, by)


def get(name):
    return DEFAULT.get(name)


def observe(name, seconds):
    DEFAULT.observe(name, seconds)


def timings(name):
    return DEFAULT.timings(name)


def snapshot():
    return DEFAULT.snapshot()


def reset():
    DEFAULT.reset()
PY
