#!/usr/bin/env bash
set -euo pipefail
cat > kv/store.py <<'PY'
"""An in-memory key-value store with optional per-key expiry."""

import time

_MISSING = object()


class Store:
    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._data = {}  # key -> (value, expires_at or None)

    def _live(self, key):
        """The entry of a key that exists and has not expired, else None."""
        entry = self._data.get(key)
        if entry is None or (entry[1] is not None and self._clock() >= entry[1]):
            return None
        return entry

    def set(self, key, value, ttl=None):
        if ttl is not None and not ttl > 0:
            raise ValueError(f"ttl must be > 0 seconds, got {ttl!r}")
        self._data[key] = (value, None if ttl is None else self._clock() + ttl)

    def get(self, key, default=None):
        entry = self._live(key)
        return default if entry is None else entry[0]

    def ttl(self, key):
        entry = self._live(key)
        if entry is None:
            raise KeyError(key)
        return None if entry[1] is None else entry[1] - self._clock()

    def delete(self, key):
        if self._live(key) is None:
            raise KeyError(key)
        del self._data[key]

    def purge(self):
        expired = [k for k in self._data if self._live(k) is None]
        for k in expired:
            del self._data[k]
        return len(expired)

    def __contains__(self, key):
        return self._live(key) is not None

    def __len__(self):
        return sum(1 for k in self._data if self._live(k) is not None)

    def keys(self):
        return sorted(k for k in self._data if self._live(k) is not None)
PY
