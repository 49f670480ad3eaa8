"""Cache hit ratio per point of presence and route (a route is the path without its query and last segment)."""

import sys

from edgeops import logs


def route(path):
    base = path.split("?", 1)[0]
    return base.rsplit("/", 1)[0] + "/*" if base.count("/") > 2 else base


def hit_ratio(log_dir):
    """{(pop, route): {"requests", "hits", "misses", "ratio"}}; STALE counts as a hit, BYPASS as neither."""
    out = {}
    for e in logs.edge_lines(log_dir):
        row = out.setdefault((e["pop"], route(e["path"])), {"requests": 0, "hits": 0, "misses": 0})
        row["requests"] += 1
        row["hits"] += e["cache"] in ("HIT", "STALE")
        row["misses"] += e["cache"] == "MISS"
    for row in out.values():
        row["ratio"] = row["hits"] / max(1, row["hits"] + row["misses"])
    return out


if __name__ == "__main__":
    for (pop, r), row in sorted(hit_ratio(sys.argv[1]).items()):
        print("%-5s %-28s %8d %6.1f%%" % (pop, r, row["requests"], 100 * row["ratio"]))
