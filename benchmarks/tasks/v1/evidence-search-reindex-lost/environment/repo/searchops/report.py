"""The weekly indexing report: changes, writes, skips, lag and reindexes per day."""

import collections

from searchops import feeds, lag, reindex

DAY_S = 86400


def by_day(log_dir, start):
    """{day: {"changes", "deletes", "writes", "dual_writes", "skips", "p50_lag", "p99_lag", "reindexes",
    "aborted"}}."""
    out = collections.defaultdict(collections.Counter)
    for c in feeds.iter_changes(log_dir):
        row = out[int((c["ts"] - start) // DAY_S)]
        row["changes"] += 1
        row["deletes"] += c["op"] == "delete"
    for x in feeds.iter_indexer(log_dir):
        row = out[int((x.ts - start) // DAY_S)]
        if isinstance(x, feeds.Skip):
            row["skips"] += 1
        else:
            row["writes"] += 1
            row["dual_writes"] += len(x.indexes) > 1
    for r in reindex.runs(log_dir):
        row = out[int((r.start - start) // DAY_S)]
        row["reindexes"] += 1
        row["aborted"] += r.outcome == "aborted"
    lags = collections.defaultdict(list)
    for ts, value, _, _ in lag.lags(log_dir):
        lags[int((ts - start) // DAY_S)].append(value)
    table = {}
    for day, row in sorted(out.items()):
        values = sorted(lags[day])
        table[day] = dict(row)
        table[day]["p50_lag"] = values[len(values) // 2] if values else None
        table[day]["p99_lag"] = values[min(len(values) - 1, int(0.99 * len(values)))] if values else None
    return table


def week_start(log_dir):
    first = min(c["ts"] for c in feeds.iter_changes(log_dir))
    return first - first % DAY_S


def render(table):
    lines = ["day   changes  deletes   writes    dual  skips   p50 lag  p99 lag  reindexes (aborted)"]
    for day, r in table.items():
        lines.append("d%-3d %8d %8d %8d %7d %6d  %7s  %7s  %d (%d)" % (
            day, r.get("changes", 0), r.get("deletes", 0), r.get("writes", 0), r.get("dual_writes", 0),
            r.get("skips", 0), "-" if r["p50_lag"] is None else "%.1f s" % r["p50_lag"],
            "-" if r["p99_lag"] is None else "%.1f s" % r["p99_lag"], r.get("reindexes", 0), r.get("aborted", 0)))
    return "\n".join(lines)
