"""Readers of the four exports (docs/formats.md)."""

import collections
import csv
import json
import os

Write = collections.namedtuple("Write", "ts indexer op doc version indexes")
Skip = collections.namedtuple("Skip", "ts indexer doc version")


def _files(log_dir, sub, prefix=""):
    folder = os.path.join(log_dir, sub)
    return [os.path.join(folder, n) for n in sorted(os.listdir(folder)) if n.startswith(prefix)]


def iter_changes(log_dir, dedup=True):
    """Every change of the stream in file order; a redelivered line once when dedup."""
    seen = set()
    for path in _files(log_dir, "cdc"):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                c = json.loads(line)
                if dedup:
                    if c["change"] in seen:
                        continue
                    seen.add(c["change"])
                yield c


def changes_by_version(log_dir):
    """{(doc, version): change}."""
    return {(c["doc"], c["version"]): c for c in iter_changes(log_dir)}


def history(log_dir):
    """{doc: [(commit ts, version, change id, op)] in commit order}."""
    out = collections.defaultdict(list)
    for c in iter_changes(log_dir):
        out[c["doc"]].append((c["ts"], c["version"], c["change"], c["op"]))
    for v in out.values():
        v.sort()
    return dict(out)


def parse_indexer(line):
    """A Write or Skip of an indexer log line, or None."""
    p = line.split()
    if len(p) == 6 and p[2] in ("write", "delete"):
        return Write(float(p[0]), p[1], p[2], p[3], int(p[4]), tuple(p[5].split(",")))
    if len(p) == 6 and p[2] == "skip":
        return Skip(float(p[0]), p[1], p[3], int(p[4]))
    return None


def iter_indexer(log_dir):
    """Every Write and Skip of both indexers, file by file."""
    for path in _files(log_dir, "indexer", "ix"):
        with open(path, encoding="utf-8") as f:
            for line in f:
                x = parse_indexer(line)
                if x is not None:
                    yield x


def iter_reindex(log_dir):
    """Every reindex job line as (ts, verb, fields), in time order."""
    out = []
    for path in _files(log_dir, "indexer", "reindex-"):
        with open(path, encoding="utf-8") as f:
            for line in f:
                p = line.split()
                if len(p) >= 3:
                    out.append((float(p[0]), p[1], p[2:]))
    return sorted(out)


def iter_answers(log_dir):
    """Every sampled search answer row, numbers converted."""
    for path in _files(log_dir, "search"):
        with open(path, newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                yield {"ts": float(r["ts"]), "node": r["node"], "query": r["query"], "rank": int(r["rank"]),
                       "doc": r["doc"], "version": int(r["version"])}
