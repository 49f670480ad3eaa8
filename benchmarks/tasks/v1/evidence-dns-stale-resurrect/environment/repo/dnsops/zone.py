"""The authoritative zone's snapshot and change history (docs/formats.md)."""

import bisect
import json
import os


class Zone:
    """The records of the zone over the week: `value(name, ts)` is the address in force at ts."""

    def __init__(self, log_dir):
        with open(os.path.join(log_dir, "zone", "snapshot.json"), encoding="utf-8") as f:
            snap = json.load(f)
        self.start = snap["ts"]
        self.ttl = {n: r["ttl"] for n, r in snap["records"].items()}
        self._history = {n: ([self.start], [r["value"]]) for n, r in snap["records"].items()}
        with open(os.path.join(log_dir, "zone", "changes.jsonl"), encoding="utf-8") as f:
            changes = sorted((json.loads(line) for line in f if line.strip()), key=lambda x: x["ts"])
        for x in changes:
            if x["name"] not in self._history:
                raise ValueError("change of %r, a name the snapshot does not hold" % x["name"])
            self._history[x["name"]][0].append(x["ts"])
            self._history[x["name"]][1].append(x["value"])

    def names(self):
        return sorted(self._history)

    def value(self, name, ts):
        times, values = self._history[name]
        k = bisect.bisect_right(times, ts) - 1
        if k < 0:
            raise ValueError("ts %d is before the snapshot (%d)" % (ts, self.start))
        return values[k]

    def changes(self, name):
        """[(ts, value)] of name's changes after the snapshot."""
        times, values = self._history[name]
        return list(zip(times[1:], values[1:]))
