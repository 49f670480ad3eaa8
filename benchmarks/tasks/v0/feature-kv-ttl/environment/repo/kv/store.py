"""An in-memory key-value store."""

import time

_MISSING = object()


class Store:
    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._data = {}

    def set(self, key, value):
        self._data[key] = value

    def get(self, key, default=None):
        return self._data.get(key, default)

    def delete(self, key):
        if key not in self._data:
            raise KeyError(key)
        del self._data[key]

    def __contains__(self, key):
        return key in self._data

    def __len__(self):
        return len(self._data)

    def keys(self):
        return sorted(self._data)
