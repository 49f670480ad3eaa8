"""Origin errors per node and day: what the on-call rotation reviews every morning."""

from edgeops import logs


def errors(log_dir, start):
    """{(node, day): {status: count}} for the origin's non-200 answers."""
    out = {}
    for o in logs.origin_lines(log_dir):
        if o["status"] != 200:
            row = out.setdefault((o["node"], int((o["ts"] - start) // 86400)), {})
            row[o["status"]] = row.get(o["status"], 0) + 1
    return out
