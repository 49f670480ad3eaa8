"""Gateway connection logs (docs/log-formats.md)."""

import json
import os


def iter_connections(log_dir):
    """Every gateway line under log_dir/gateway, as dicts, file by file (duplicates included)."""
    folder = os.path.join(log_dir, "gateway")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)


def by_request(log_dir):
    """{request id: [connection lines]} (duplicates included, in file order)."""
    out = {}
    for line in iter_connections(log_dir):
        out.setdefault(line["req"], []).append(line)
    return out
