"""Orders priced with an outdated price by a cache node that already knew of the change.

The price in effect for a SKU at a time is the committed change with the latest `effective` at or before it (a
scheduled change takes effect after its commit). An order is priced when its cart was (`priced_at`: quotes are
honoured for 30 minutes), by its `node`. A node may serve the old price until it receives the change's
invalidation (`inval sku lsn` in its log); an order it priced with a price not in effect after it had received an
invalidation for the change in effect came from an entry refilled from a replica that had not applied the change.
Repeated order lines are one order.
"""

import bisect
import csv
import json
import os


def _prices(log_dir):
    """{sku: [(effective, lsn, cents)] sorted}."""
    out = {}
    folder = os.path.join(log_dir, "db")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), newline="") as f:
            for row in csv.DictReader(f):
                out.setdefault(row["sku"], []).append((float(row["effective"]), int(row["lsn"]),
                                                       int(row["unit_cents"])))
    for changes in out.values():
        changes.sort()
    return out


def _invalidations(log_dir):
    """{(node, sku): (sorted arrival times, running max lsn received)}."""
    raw = {}
    folder = os.path.join(log_dir, "cache")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                p = line.split()
                if len(p) == 5 and p[2] == "inval":
                    raw.setdefault((p[1], p[3]), []).append((float(p[0]), int(p[4])))
    out = {}
    for key, events in raw.items():
        events.sort()
        times, best, top = [], [], 0
        for ts, lsn in events:
            top = max(top, lsn)
            times.append(ts)
            best.append(top)
        out[key] = (times, best)
    return out


def stale_priced_orders(log_dir):
    """The ids of the orders priced with a price out of effect by a node that had the change's invalidation."""
    prices, invals = _prices(log_dir), _invalidations(log_dir)
    hurt = set()
    folder = os.path.join(log_dir, "orders")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                o = json.loads(line)
                changes = prices.get(o["sku"], [])
                k = bisect.bisect_right(changes, (o["priced_at"], float("inf"))) - 1
                if k < 0 or changes[k][2] == o["unit_cents"]:
                    continue  # before the week's first change the price is unknown here: no change to miss
                times, best = invals.get((o["node"], o["sku"]), ([], []))
                j = bisect.bisect_right(times, o["priced_at"]) - 1
                if j >= 0 and best[j] >= changes[k][1]:
                    hurt.add(o["order"])
    return sorted(hurt)
