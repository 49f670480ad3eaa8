"""The API hosts' access logs of the export route (docs/formats.md)."""

import json
import os


def iter_lines(log_dir):
    """Every access-log line under log_dir/api (repeated lines included)."""
    folder = os.path.join(log_dir, "api")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)


def exports(log_dir):
    """{export id: {"tenant", "pages", "errors", "finished"}}, each distinct line once."""
    seen, out = set(), {}
    for x in iter_lines(log_dir):
        key = (x["export"], x["ts"], x["cursor"], x["status"])
        if key in seen:
            continue
        seen.add(key)
        e = out.setdefault(x["export"], {"tenant": x["tenant"], "pages": 0, "errors": 0, "finished": False})
        if x["status"] == 200:
            e["pages"] += 1
            e["finished"] = e["finished"] or x["next"] is None
        else:
            e["errors"] += 1
    return out
