"""A text buffer with positional edits."""


class Buffer:
    def __init__(self, text="", history_limit=100):
        self.text = text
        self.history_limit = history_limit

    def _check(self, pos):
        if not 0 <= pos <= len(self.text):
            raise IndexError(f"position {pos} outside 0..{len(self.text)}")

    def insert(self, pos, s):
        """Insert s before position pos."""
        self._check(pos)
        self.text = self.text[:pos] + s + self.text[pos:]

    def delete(self, start, end):
        """Delete text[start:end]; returns the deleted text."""
        self._check(start)
        self._check(end)
        if end < start:
            raise ValueError(f"end {end} < start {start}")
        removed = self.text[start:end]
        self.text = self.text[:start] + self.text[end:]
        return removed

    def replace(self, old, new):
        """Replace every occurrence of old by new; returns how many were replaced."""
        if not old:
            raise ValueError("old must not be empty")
        count = self.text.count(old)
        self.text = self.text.replace(old, new)
        return count
