#!/usr/bin/env bash
# The store counts its changes; the searcher drops its cache when the count moved.
set -euo pipefail
python3 - <<'PY'
p = "notes/store.py"
s = open(p).read()
s = s.replace("        self._ids = itertools.count(1)\n", "        self._ids = itertools.count(1)\n        self.version = 0\n")
s = s.replace("        self._notes[note_id] = text\n        return note_id\n",
              "        self._notes[note_id] = text\n        self.version += 1\n        return note_id\n")
s = s.replace("            raise KeyError(f\"no note {note_id}\")\n        self._notes[note_id] = text\n",
              "            raise KeyError(f\"no note {note_id}\")\n        self._notes[note_id] = text\n        self.version += 1\n")
s = s.replace("        del self._notes[note_id]\n", "        del self._notes[note_id]\n        self.version += 1\n")
open(p, "w").write(s)
p = "notes/search.py"
s = open(p).read()
s = s.replace("        self._cache = {}\n", "        self._cache = {}\n        self._version = store.version\n")
s = s.replace("        key = frozenset(words(query))\n",
              "        if self.store.version != self._version:\n            self._cache.clear()\n"
              "            self._version = self.store.version\n        key = frozenset(words(query))\n")
open(p, "w").write(s)
PY
