"""Daily revenue: charges, refunds and net amount per day of the week (what finance receives)."""

import sys

from payops import ledger

DAY_S = 86400


def by_day(log_dir, start):
    """{day: {"charges", "refunds", "net_cents"}} over the ledger's distinct transactions."""
    out = {}
    for row in ledger.transactions(log_dir).values():
        day = out.setdefault(int((row["created"] - start) // DAY_S), {"charges": 0, "refunds": 0, "net_cents": 0})
        day["charges" if row["kind"] == "charge" else "refunds"] += 1
        day["net_cents"] += row["amount_cents"]
    return dict(sorted(out.items()))


if __name__ == "__main__":
    rows = list(ledger.transactions(sys.argv[1]).values())
    first = min(r["created"] for r in rows)
    for day, v in by_day(sys.argv[1], first - first % DAY_S).items():
        print("d%d  charges %6d  refunds %5d  net %12.2f EUR" % (day, v["charges"], v["refunds"], v["net_cents"] / 100))
