#!/usr/bin/env bash
set -euo pipefail
cat > editor/buffer.py <<'PY'
"""A text buffer with positional edits, undo and redo (each edit stores the text before and after)."""


class Buffer:
    def __init__(self, text="", history_limit=100):
        self.text = text
        self.history_limit = history_limit
        self._undo = []  # [(before, after)], oldest first
        self._redo = []

    def _check(self, pos):
        if not 0 <= pos <= len(self.text):
            raise IndexError(f"position {pos} outside 0..{len(self.text)}")

    def _record(self, before):
        """Remember an edit that turned `before` into the current text (no-ops are not edits)."""
        if before == self.text:
            return
        self._undo.append((before, self.text))
        if len(self._undo) > self.history_limit:
            del self._undo[0]
        self._redo.clear()

    def insert(self, pos, s):
        """Insert s before position pos."""
        self._check(pos)
        before = self.text
        self.text = self.text[:pos] + s + self.text[pos:]
        self._record(before)

    def delete(self, start, end):
        """Delete text[start:end]; returns the deleted text."""
        self._check(start)
        self._check(end)
        if end < start:
            raise ValueError(f"end {end} < start {start}")
        before, removed = self.text, self.text[start:end]
        self.text = self.text[:start] + self.text[end:]
        self._record(before)
        return removed

    def replace(self, old, new):
        """Replace every occurrence of old by new; returns how many were replaced."""
        if not old:
            raise ValueError("old must not be empty")
        before, count = self.text, self.text.count(old)
        self.text = self.text.replace(old, new)
        self._record(before)
        return count

    def undo(self):
        if not self._undo:
            return False
        before, after = self._undo.pop()
        self.text = before
        self._redo.append((before, after))
        return True

    def redo(self):
        if not self._redo:
            return False
        before, after = self._redo.pop()
        self.text = after
        self._undo.append((before, after))
        return True
PY
