"""Ingest records (docs/formats.md)."""

import json
import os


def iter_intervals(log_dir):
    """Every ingest line under log_dir/ingest (repeated lines included)."""
    folder = os.path.join(log_dir, "ingest")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)


def registry(log_dir):
    """{meter: {"zone", "firmware"}}."""
    with open(os.path.join(log_dir, "registry.json"), encoding="utf-8") as f:
        return json.load(f)
