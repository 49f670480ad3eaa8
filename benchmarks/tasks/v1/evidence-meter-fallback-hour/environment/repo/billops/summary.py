"""The weekly summary for finance: meters, distinct intervals and kWh billed per zone."""

import collections
import sys

from billops import ingest


def by_zone(log_dir):
    """{zone: {"meters", "intervals", "kwh"}} over distinct interval ids."""
    zones = ingest.registry(log_dir)
    out = collections.defaultdict(lambda: {"meters": set(), "intervals": 0, "kwh": 0.0})
    seen = set()
    for x in ingest.iter_intervals(log_dir):
        if x["interval"] in seen:
            continue
        seen.add(x["interval"])
        row = out[zones.get(x["meter"], {}).get("zone", "unknown")]
        row["meters"].add(x["meter"])
        row["intervals"] += 1
        row["kwh"] += x["kwh"]
    return {z: {"meters": len(r["meters"]), "intervals": r["intervals"], "kwh": round(r["kwh"], 3)}
            for z, r in sorted(out.items())}


def main(argv):
    for zone, row in by_zone(argv[0] if argv else "logs").items():
        print("%-20s %5d meters %7d intervals %12.3f kWh" % (zone, row["meters"], row["intervals"], row["kwh"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
