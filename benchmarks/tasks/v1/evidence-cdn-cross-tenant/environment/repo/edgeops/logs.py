"""Readers of the edge access logs and the origin logs (docs/log-formats.md)."""

import json
import os
import shlex

EDGE_FIELDS = ("time", "pop", "req", "session", "tenant", "request", "status", "cache", "bytes", "etag", "ms", "ua")


def parse_edge_line(line):
    """One edge access log line as a dict of EDGE_FIELDS (status and bytes as int, ms without its unit)."""
    values = shlex.split(line)
    if len(values) != len(EDGE_FIELDS):
        raise ValueError("expected %d fields in an edge line, got %d: %r" % (len(EDGE_FIELDS), len(values), line))
    out = dict(zip(EDGE_FIELDS, values))
    out["status"], out["bytes"], out["ms"] = int(out["status"]), int(out["bytes"]), int(out["ms"][:-2])
    out["method"], out["path"] = out.pop("request").split(" ", 1)
    return out


def edge_lines(log_dir):
    folder = os.path.join(log_dir, "edge")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            yield from (parse_edge_line(line) for line in f if line.strip())


def origin_lines(log_dir):
    folder = os.path.join(log_dir, "origin")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            yield from (json.loads(line) for line in f if line.strip())
