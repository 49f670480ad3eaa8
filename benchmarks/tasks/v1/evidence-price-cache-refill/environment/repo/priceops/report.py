"""The weekly pricing report: orders, revenue, price changes and cache fills per day."""

import collections
import sys

from priceops import feeds

DAY_S = 86400


def by_day(log_dir, start):
    """{day: {"orders", "revenue_cents", "changes", "fills", "primary_fills"}}."""
    out = collections.defaultdict(collections.Counter)
    for o in feeds.orders(log_dir).values():
        day = out[int((o["ts"] - start) // DAY_S)]
        day["orders"] += 1
        day["revenue_cents"] += o["qty"] * o["unit_cents"]
    for c in feeds.iter_commits(log_dir):
        out[int((c["committed"] - start) // DAY_S)]["changes"] += 1
    for ts, _, op, fields in feeds.iter_cache(log_dir):
        if op == "fill":
            day = out[int((ts - start) // DAY_S)]
            day["fills"] += 1
            day["primary_fills"] += fields[1] == "primary"
    return {d: dict(c) for d, c in sorted(out.items())}


def main(argv):
    log_dir = argv[0] if argv else "logs"
    first = min(o["ts"] for o in feeds.iter_orders(log_dir))
    for day, row in by_day(log_dir, first - first % DAY_S).items():
        print("d%d  %6d orders  %12.2f revenue  %5d changes  %6d fills (%d from the primary)"
              % (day, row.get("orders", 0), row.get("revenue_cents", 0) / 100, row.get("changes", 0),
                 row.get("fills", 0), row.get("primary_fills", 0)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
