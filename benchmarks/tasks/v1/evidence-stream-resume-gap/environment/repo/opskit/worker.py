"""Worker traces (docs/log-formats.md)."""

import json
import os


def read_trace(path):
    """The events of one worker trace, in file order."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def iter_traces(log_dir):
    """(request id, events) for every trace under log_dir/worker."""
    folder = os.path.join(log_dir, "worker")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".jsonl"):
            yield name[:-len(".jsonl")], read_trace(os.path.join(folder, name))


def answer_bytes(events):
    """Total answer bytes from the end event, or None when the client went away."""
    ends = [e["total"] for e in events if e.get("ev") == "end"]
    return ends[-1] if ends else None
