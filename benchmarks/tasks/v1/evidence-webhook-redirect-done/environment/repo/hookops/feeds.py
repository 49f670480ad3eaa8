"""Readers of the three exports (docs/formats.md)."""

import collections
import csv
import json
import os

from hookops.timefmt import parse_iso

Attempt = collections.namedtuple("Attempt", "ts worker delivery event endpoint try_ url status ms via")
FINAL = ("delivered", "dead", "failed")


def _files(log_dir, sub):
    folder = os.path.join(log_dir, sub)
    return [os.path.join(folder, n) for n in sorted(os.listdir(folder))]


def iter_events(log_dir):
    """Every event (one line each)."""
    for path in _files(log_dir, "events"):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)


def parse_attempt(line):
    """An Attempt of a worker log line, or None for a line that is not one."""
    p = line.split()
    if len(p) < 11 or p[8] != "->" or not p[5].startswith("try="):
        return None
    tr = p[5][4:]
    via = None
    if len(p) > 11 and p[11].startswith("via="):
        via = p[11][4:]
    return Attempt(parse_iso(p[0]), p[1], p[2], p[3], p[4], tr if tr == "manual" else int(tr), p[7], p[9],
                   int(p[10].rstrip("ms")), via)


def iter_attempts(log_dir, dedup=True):
    """Every attempt of every worker, in file order; repeated lines (at-least-once shipping) once when dedup."""
    for path in _files(log_dir, "workers"):
        seen = set()
        with open(path, encoding="utf-8") as f:
            for line in f:
                if dedup:
                    if line in seen:
                        continue
                    seen.add(line)
                a = parse_attempt(line)
                if a is not None:
                    yield a


def attempts_by_delivery(log_dir):
    """{delivery: [Attempt] in time order}."""
    out = collections.defaultdict(list)
    for a in iter_attempts(log_dir):
        out[a.delivery].append(a)
    for v in out.values():
        v.sort(key=lambda a: a.ts)
    return dict(out)


def iter_journal(log_dir):
    """Every journal row, numbers converted."""
    for path in _files(log_dir, "outbox"):
        with open(path, newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                yield {"delivery": r["delivery"], "event": r["event"], "endpoint": r["endpoint"],
                       "state": r["state"], "at": float(r["at"]), "attempts": int(r["attempts"])}


def final_states(log_dir):
    """{delivery: the journal row of its final state} (deliveries still retrying at the week's end are absent)."""
    return {r["delivery"]: r for r in iter_journal(log_dir) if r["state"] in FINAL}


def deliveries(log_dir):
    """{delivery: {"event", "endpoint", "queued", "state", "at", "attempts"}}; state None while unfinished."""
    out = {}
    for r in iter_journal(log_dir):
        d = out.setdefault(r["delivery"], {"event": r["event"], "endpoint": r["endpoint"], "queued": None,
                                           "state": None, "at": None, "attempts": 0})
        if r["state"] == "queued":
            d["queued"] = r["at"]
        elif r["state"] in FINAL:
            d.update(state=r["state"], at=r["at"], attempts=r["attempts"])
        else:
            d["attempts"] = max(d["attempts"], r["attempts"])
    return out
