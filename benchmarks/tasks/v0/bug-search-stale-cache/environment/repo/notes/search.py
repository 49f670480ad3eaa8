"""Search with a result cache."""

from notes.index import words


class Searcher:
    def __init__(self, store):
        self.store = store
        self._cache = {}
        self._hits = self._misses = 0

    def search(self, query):
        """Sorted ids of the notes containing every word of the query."""
        key = frozenset(words(query))
        if key in self._cache:
            self._hits += 1
            return list(self._cache[key])
        self._misses += 1
        result = sorted(i for i, text in self.store.items() if key <= words(text))
        self._cache[key] = result
        return list(result)

    def stats(self):
        return {"hits": self._hits, "misses": self._misses}
