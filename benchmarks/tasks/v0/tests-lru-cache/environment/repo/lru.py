"""A least-recently-used cache."""

from collections import OrderedDict

_MISSING = object()


class LRUCache:
    """Holds at most `capacity` entries (capacity >= 0, else ValueError); capacity 0 stores nothing.

    `get(key, default=None)` returns the value and marks the key most recently used (a miss changes nothing).
    `put(key, value)` inserts or updates the value and marks the key most recently used; if that makes the cache
    exceed its capacity, the least recently used entry is evicted and passed to `on_evict(key, value)` if given.
    `peek(key, default=None)` returns the value without changing recency. `len()`, `in` (no recency change) and
    `keys()` (least to most recently used) work as expected. `hits` and `misses` count `get` calls.
    """

    def __init__(self, capacity, on_evict=None):
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self.on_evict = on_evict
        self._data = OrderedDict()
        self.hits = self.misses = 0

    def get(self, key, default=None):
        value = self._data.get(key, _MISSING)
        if value is _MISSING:
            self.misses += 1
            return default
        self.hits += 1
        self._data.move_to_end(key)
        return value

    def peek(self, key, default=None):
        return self._data.get(key, default)

    def put(self, key, value):
        if self.capacity == 0:
            return
        self._data[key] = value
        self._data.move_to_end(key)
        if len(self._data) > self.capacity:
            old_key, old_value = self._data.popitem(last=False)
            if self.on_evict is not None:
                self.on_evict(old_key, old_value)

    def __contains__(self, key):
        return key in self._data

    def __len__(self):
        return len(self._data)

    def keys(self):
        return list(self._data)
