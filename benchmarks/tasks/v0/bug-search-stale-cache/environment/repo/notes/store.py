"""The note store."""

import itertools


class NoteStore:
    def __init__(self):
        self._notes = {}
        self._ids = itertools.count(1)

    def add(self, text):
        note_id = next(self._ids)
        self._notes[note_id] = text
        return note_id

    def update(self, note_id, text):
        if note_id not in self._notes:
            raise KeyError(f"no note {note_id}")
        self._notes[note_id] = text

    def delete(self, note_id):
        del self._notes[note_id]

    def items(self):
        return list(self._notes.items())
