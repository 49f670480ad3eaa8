"""Readers of the three exports (docs/formats.md)."""

import collections
import csv
import datetime
import json
import os

Event = collections.namedtuple("Event", "ts node verb fields")


def _files(log_dir, sub):
    folder = os.path.join(log_dir, sub)
    return [os.path.join(folder, n) for n in sorted(os.listdir(folder))]


def parse_time(stamp):
    """UTC seconds of an auth node's ISO 8601 time (offset required)."""
    dt = datetime.datetime.fromisoformat(stamp)
    if dt.tzinfo is None:
        raise ValueError("no offset in %r" % stamp)
    return dt.timestamp()


def iter_gateway(log_dir, dedup=True):
    """Every gateway request; a repeated line once when dedup."""
    for path in _files(log_dir, "gateway"):
        seen = set()
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                if dedup:
                    if line in seen:
                        continue
                    seen.add(line)
                yield json.loads(line)


def requests(log_dir, paths=None):
    """{request id: gateway request}, only for the given paths when paths is set."""
    return {g["req"]: g for g in iter_gateway(log_dir) if paths is None or g["path"] in paths}


def parse_event(line):
    """An Event of an auth line (fields: {key: value}; gen of a refresh becomes (G, G+1)), or None."""
    p = line.split()
    if len(p) < 4:
        return None
    fields = {}
    for item in p[3:]:
        key, sep, value = item.partition("=")
        if not sep:
            return None
        fields[key] = value
    if "gen" in fields:
        if "->" in fields["gen"]:
            a, b = fields["gen"].split("->")
            fields["gen"] = (int(a), int(b))
        else:
            fields["gen"] = int(fields["gen"])
    return Event(parse_time(p[0]), p[1], p[2], fields)


def iter_auth(log_dir):
    """Every auth event of every node, file by file."""
    for path in _files(log_dir, "auth"):
        with open(path, encoding="utf-8") as f:
            for line in f:
                e = parse_event(line)
                if e is not None:
                    yield e


def iter_ended(log_dir):
    """Every ended-session row, times converted."""
    for path in _files(log_dir, "sessions"):
        with open(path, newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                yield {"fam": r["fam"], "user": r["user"], "created": float(r["created"]),
                       "ended": float(r["ended"]), "reason": r["reason"]}
