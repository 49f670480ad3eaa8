"""The weekly sessions report: logins, refreshes, graces, revocations and session ends per day."""

import collections

from authops import feeds

DAY_S = 86400


def by_day(log_dir, start):
    """{day: Counter of login, refresh, grace, revoke, logout:REASON, expire, and ended:REASON from the export}."""
    out = collections.defaultdict(collections.Counter)
    for e in feeds.iter_auth(log_dir):
        row = out[int((e.ts - start) // DAY_S)]
        if e.verb == "reuse":
            row[e.fields.get("action", "reuse")] += 1
        elif e.verb == "logout":
            row["logout:" + e.fields.get("reason", "?")] += 1
        else:
            row[e.verb] += 1
    for r in feeds.iter_ended(log_dir):
        out[int((r["ended"] - start) // DAY_S)]["ended:" + r["reason"]] += 1
    return {d: dict(c) for d, c in sorted(out.items())}


def week_start(log_dir):
    first = min(e.ts for e in feeds.iter_auth(log_dir))
    return first - first % DAY_S


COLUMNS = ("login", "refresh", "grace", "revoke", "logout:user", "logout:password_change", "logout:admin", "expire")


def render(table):
    lines = ["day  " + "  ".join("%10s" % c.split(":")[-1][:10] for c in COLUMNS)]
    for day, row in table.items():
        lines.append("d%-3d " % day + "  ".join("%10d" % row.get(c, 0) for c in COLUMNS))
    return "\n".join(lines)
