"""The daily traffic report: requests, statuses, reconnects and tokens per day."""

import collections
import sys

from opskit import billing, gateway

DAY_S = 86400


def daily(log_dir):
    """{day index: counters} over the week's logs (duplicate gateway lines counted once)."""
    days = collections.defaultdict(collections.Counter)
    seen = set()
    lines = list(gateway.iter_connections(log_dir))
    rows = list(billing.iter_rows(log_dir))
    first_ts = min([line["ts"] for line in lines] + [float(row["started"]) for row in rows], default=0.0)
    for line in lines:
        key = (line["req"], line["conn"])
        if key in seen:
            continue
        seen.add(key)
        day = int((line["ts"] - first_ts) // DAY_S)
        days[day]["connections"] += 1
        days[day]["status_%d" % line["status"]] += 1
        days[day]["reconnects"] += line["conn"] > 0
    for row in rows:
        day = int((float(row["started"]) - first_ts) // DAY_S)
        days[day]["requests"] += 1
        days[day]["tokens_generated"] += row["tokens_generated"]
        days[day]["tokens_billed"] += row["tokens_billed"]
    return dict(sorted(days.items()))


def main(argv):
    for day, c in daily(argv[0] if argv else "logs").items():
        print("day %d: %s" % (day, ", ".join("%s=%d" % kv for kv in sorted(c.items()))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
