"""Edge gateway access logs (docs/log-formats.md)."""

import json
import os


def iter_lines(log_dir, route=None):
    """Every gateway line under log_dir/gateway, optionally of one route (repeated lines included)."""
    folder = os.path.join(log_dir, "gateway")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    g = json.loads(line)
                    if route is None or g["route"] == route:
                        yield g


def error_rate(log_dir, route):
    """Share of a route's distinct attempts (trace ids) that did not answer 2xx."""
    seen = {}
    for g in iter_lines(log_dir, route):
        seen[g["trace"]] = g["status"]
    return sum(1 for s in seen.values() if not 200 <= s < 300) / max(1, len(seen))
