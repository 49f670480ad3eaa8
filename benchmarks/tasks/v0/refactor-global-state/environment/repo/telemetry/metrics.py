"""Process-wide counters and timings."""

import copy

_counters = {}
_timings = {}


def incr(name, by=1):
    """Add `by` to counter `name` (created at 0); returns the new value."""
    global _counters
    _counters[name] = _counters.get(name, 0) + by
    return _counters[name]


def get(name):
    """Current value of a counter (0 if never incremented)."""
    return _counters.get(name, 0)


def observe(name, seconds):
    """Record one duration for timing `name`."""
    if seconds < 0:
        raise ValueError(f"negative duration {seconds} for {name!r}")
    _timings.setdefault(name, []).append(float(seconds))


def timings(name):
    """(count, total, max) of the durations recorded for `name`."""
    values = _timings.get(name, [])
    return len(values), sum(values), max(values, default=0.0)


def snapshot():
    """A deep copy of everything: {"counters": {...}, "timings": {name: [durations]}}."""
    return {"counters": copy.deepcopy(_counters), "timings": copy.deepcopy(_timings)}


def reset():
    """Forget everything."""
    global _counters, _timings
    _counters = {}
    _timings = {}
