"""The weekly delivery report: deliveries, outcomes, attempts and latency per day."""

import collections
import math

from hookops import feeds
from hookops.timefmt import DAY_S, human


def percentile(values, q):
    """The q-quantile (0..1) of values by nearest rank; None when empty."""
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def by_day(log_dir, start):
    """{day: {"queued", "delivered", "dead", "failed", "attempts", "manual", "p50_s", "p95_s"}} by the day a
    delivery was queued; p50/p95: queued to delivered."""
    out = collections.defaultdict(collections.Counter)
    latency = collections.defaultdict(list)
    for d in feeds.deliveries(log_dir).values():
        if d["queued"] is None:
            continue
        day = int((d["queued"] - start) // DAY_S)
        row = out[day]
        row["queued"] += 1
        if d["state"]:
            row[d["state"]] += 1
        if d["state"] == "delivered":
            latency[day].append(d["at"] - d["queued"])
    for a in feeds.iter_attempts(log_dir):
        row = out[int((a.ts - start) // DAY_S)]
        row["attempts"] += 1
        row["manual"] += a.try_ == "manual"
    table = {}
    for day, row in sorted(out.items()):
        table[day] = dict(row)
        table[day]["p50_s"] = percentile(latency[day], 0.5)
        table[day]["p95_s"] = percentile(latency[day], 0.95)
    return table


def render(table):
    lines = ["day   queued  delivered   dead  failed  attempts  manual   p50       p95"]
    for day, row in table.items():
        lines.append("d%-3d %7d  %9d  %5d  %6d  %8d  %6d   %-9s %s" % (
            day, row.get("queued", 0), row.get("delivered", 0), row.get("dead", 0), row.get("failed", 0),
            row.get("attempts", 0), row.get("manual", 0),
            human(row["p50_s"]) if row["p50_s"] is not None else "-",
            human(row["p95_s"]) if row["p95_s"] is not None else "-"))
    return "\n".join(lines)


def week_start(log_dir):
    first = min(e["created"] for e in feeds.iter_events(log_dir))
    return first - first % DAY_S
