"""A week of a shop's orders, its price-cache nodes' logs and the price table's commit log, from a seed (stdlib only).

    python generate.py REPO     builds REPO from its pinned redis-py release and history (sdist_repo.py, a copy of
                                the suite's shared script next to this file: the release the pricing team's
                                scripts are built on, then its priceops/ tools as a commit), then writes
                                REPO/logs/ (seed 9, 30,000 orders: 875 files, 23 MB)

Three sources, joined by SKU, node and time:
  logs/orders/orders-dDAY-hHOUR.jsonl  one line per order: ts, order, customer, node (the price-cache node that
                                       priced the cart), sku, qty, unit_cents (the price charged), priced_at (when
                                       the cart was priced: a quote is honoured for 30 minutes), payment and the
                                       session's details (ip, user agent, shipping); shipped
                                       at least once, so a line can repeat
  logs/cache/NODE-dDAY-hHOUR.log       the cache nodes: `ts node inval sku lsn` (an invalidation received),
                                       `ts node fill sku SOURCE lsn price` (an entry filled from a read replica or
                                       the primary, SOURCE = r1..r3 or primary, lsn = the source's applied lsn),
                                       `ts node expire sku` (TTL 1,800 s)
  logs/db/prices-dDAY.csv              the price table's commit log: lsn, committed, sku, unit_cents, effective
                                       (a scheduled change takes effect later than its commit)

The cache's bug (fixed in production at a point of the week, in no repository): after an invalidation a node
refilled the entry from any read replica, even one that had not applied the change the invalidation announced, and
kept the old price for the entry's TTL. After the fix a fill from a replica behind the invalidation's lsn reads the
primary. An order is hurt when it was priced with a price no longer in effect by a node that had already received
that change's invalidation. Harmless anomalies: old prices served before the invalidation reached a node (the bus
lags, badly at times), quotes honoured after a price change, scheduled changes committed before they take effect,
fills from replicas behind other SKUs' changes, repeated order lines.

The verifier's setup.py imports this file (a copy in tests/) to draw fresh weeks with other seeds and fix times;
`write_logs` returns the true labels ({order id: hurt}); given a dict as `kinds`, it also fills in the harmless
anomaly kinds drawn ({kind: orders}) for benchmarks/evidence_stats.py.
"""

from __future__ import annotations

import bisect
import csv
import json
import os
import random
import sys

START = 1_701_648_000  # 2023-12-04T00:00:00Z
WEEK = 7 * 86400
NODES = ("pc1", "pc2", "pc3", "pc4")
REPLICAS = ("r1", "r2", "r3")
TTL = 1800
CHANGES = 14000  # price changes in a week
QUOTE_S = 1800
QUOTED = 0.8  # the share of orders placed on a quote
DB_FIELDS = ("lsn", "committed", "sku", "unit_cents", "effective")
PAYMENTS = ("card", "card", "card", "paypal", "invoice", "giftcard")
AGENTS = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
          "Chrome/119.0 Safari/537.36",
          "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
          "Mobile/15E148",
          "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
          "Version/17.1 Safari",
          "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/119.0 Mobile Safari",
          "ShopApp/5.31.0 (Android 13; SM-S911B) okhttp/4.11.0",
          "ShopApp/5.31.0 (iOS 17.1.1; iPhone15,2) CFNetwork/1485")
SHIPPING = (("DE", "dhl"), ("DE", "hermes"), ("FR", "colissimo"), ("NL", "postnl"), ("AT", "post"), ("IT", "brt"))


def _hex(rng: random.Random, bits: int = 48) -> str:
    return "%0*x" % (bits // 4, rng.getrandbits(bits))


def _episodes(rng: random.Random, n: tuple[int, int], length: tuple[float, float]) -> list[tuple[float, float]]:
    out = []
    for _ in range(rng.randint(*n)):
        s = START + rng.uniform(0, WEEK)
        out.append((s, s + rng.uniform(*length)))
    return sorted(out)


def _inside(spans, t):
    k = bisect.bisect_right(spans, (t, float("inf"))) - 1
    return k >= 0 and spans[k][0] <= t < spans[k][1]


class Prices:
    """The price table over the week: changes [(lsn, committed, sku, cents, effective)]."""

    def __init__(self, initial: dict, changes: list):
        self.changes = changes
        self.commit_times = [c[1] for c in changes]  # changes are in lsn (= commit) order
        self.by_sku = {}
        for c in changes:
            self.by_sku.setdefault(c[2], []).append(c)
        self.initial = initial

    def effective(self, sku, t, committed_by=None):
        """(cents, lsn) in effect at t for sku, counting only changes committed by committed_by (a replica)."""
        best = (self.initial[sku], 0, -1.0)
        for lsn, com, _, cents, eff in self.by_sku.get(sku, ()):
            if eff <= t and (committed_by is None or com <= committed_by) and (eff, lsn) > (best[2], best[1]):
                best = (cents, lsn, eff)
        return best[0], best[1]

    def lsn_at(self, t):
        """The last lsn committed at or before t."""
        return bisect.bisect_right(self.commit_times, t)


def write_logs(folder: str, seed: int = 9, count: int = 30_000, fixed_at: float | None = None,
               skus: int = 400, kinds: dict | None = None) -> dict:
    """Write a week under folder/{orders,cache,db}; {order id: priced stale after its node got the invalidation}.
    fixed_at (UTC seconds): when the cache fix went out; by default on the second or third day. kinds: filled with
    the harmless anomaly kinds drawn (module docstring)."""
    met = {}  # harmless anomaly kind -> orders (the ground truth evidence_stats.py counts)
    rng = random.Random(seed)
    if fixed_at is None:
        fixed_at = START + WEEK * rng.uniform(0.2, 0.35)
    names = ["SKU-%05d" % rng.randrange(100_000) for _ in range(skus)]
    names = sorted(set(names))
    initial = {s: rng.choice((499, 999, 1499, 1999, 2999, 4999, 7999)) for s in names}
    raw = []
    weights = [1.0 / (k + 1) ** 0.8 for k in range(len(names))]
    for s, w in zip(names, weights):
        for _ in range(1 + int(rng.uniform(0.5, 1.5) * CHANGES * w / sum(weights))):  # popular items change often
            com = START + rng.uniform(0, WEEK)
            eff = com if rng.random() < 0.88 else com + rng.uniform(1800, 6 * 3600)
            raw.append((com, s, max(99, initial[s] + rng.choice((-500, -200, -100, 100, 200, 500))), eff))
    raw.sort()
    prices = Prices(initial, [(k + 1, com, s, cents, eff) for k, (com, s, cents, eff) in enumerate(raw)])
    backlog = _episodes(rng, (15, 25), (1800, 5400))  # the invalidation bus lags
    lagging = {r: _episodes(rng, (70, 100), (900, 4800)) for r in REPLICAS}  # a replica falls behind
    arrivals = {}  # (node, sku) -> sorted [(arrival, lsn)]
    for lsn, com, s, cents, eff in prices.changes:
        for node in NODES:
            delay = rng.uniform(20, 400) if _inside(backlog, eff) else rng.uniform(0.05, 1.5)
            arrivals.setdefault((node, s), []).append((eff + delay, lsn))
    customers = ["cu_" + _hex(rng, 32) for _ in range(max(100, count // 5))]
    orders = []
    for _ in range(count):
        ts = START + rng.uniform(0, WEEK)
        quoted = rng.random() < QUOTED
        orders.append({"ts": round(ts, 3), "order": "o_" + _hex(rng), "customer": rng.choice(customers),
                       "node": rng.choice(NODES), "sku": rng.choices(names, weights)[0], "qty": rng.randint(1, 3),
                       "unit_cents": None, "priced_at": round(ts - (rng.uniform(30, QUOTE_S) if quoted else 0), 3),
                       "quote": ("q_" + _hex(rng, 32)) if quoted else None, "payment": rng.choice(PAYMENTS),
                       "currency": "EUR", "session": "s_" + _hex(rng, 64), "trace": _hex(rng, 128),
                       "ip": "%d.%d.%d.%d" % (rng.randrange(1, 224), rng.randrange(256), rng.randrange(256),
                                              rng.randrange(1, 255)),
                       "ship": dict(zip(("country", "method"), rng.choice(SHIPPING))), "ua": rng.choice(AGENTS)})
    lookups = {}
    for o in orders:
        lookups.setdefault((o["node"], o["sku"]), []).append(o)
    cache_lines, labels = [], {}

    def fill(node, sku, q, known):
        """Fill an entry at q; its price (the replica's view, or the primary's after the fix)."""
        replica = rng.choice(REPLICAS)
        lag = rng.uniform(5, 90) if _inside(lagging[replica], q) else rng.uniform(0.01, 0.3)
        source, seen = replica, q - lag
        rlsn = prices.lsn_at(seen)
        if rlsn < known and q >= fixed_at:  # the fix: a replica behind the invalidation reads the primary
            source, seen, rlsn = "primary", q, prices.lsn_at(q)
        cents = prices.effective(sku, q, committed_by=seen)[0]
        cache_lines.append((q, "%.3f %s fill %s %s %d %d" % (q, node, sku, source, rlsn, cents)))
        return cents, q, rlsn < prices.lsn_at(q)  # (price, filled at, from a replica behind some change)

    for key in sorted(set(lookups) | set(arrivals)):
        node, sku = key
        events = [(a, 0, lsn) for a, lsn in arrivals.get(key, [])]
        events += [(o["priced_at"], 1, o) for o in lookups.get(key, [])]
        events.sort(key=lambda e: (e[0], e[1]))
        entry, known = None, 0  # entry: (cents, filled at); known: the highest invalidation lsn received
        for t, kind, x in events:
            if entry is not None and t >= entry[1] + TTL:
                cache_lines.append((entry[1] + TTL, "%.3f %s expire %s" % (entry[1] + TTL, node, sku)))
                entry = None
            if kind == 0:  # an invalidation: drop the entry and refresh it at once (refresh-ahead)
                cache_lines.append((t, "%.3f %s inval %s %d" % (t, node, sku, x)))
                known = max(known, x)
                entry = fill(node, sku, t + rng.uniform(0.01, 0.2), known)
                continue
            if entry is None or entry[1] > t:
                entry = fill(node, sku, t, known)
            x["unit_cents"] = entry[0]
            truth, tlsn = prices.effective(sku, t)
            labels[x["order"]] = entry[0] != truth and known >= tlsn
            if entry[0] != truth and known < tlsn:
                met.setdefault("old_price_before_invalidation", set()).add(x["order"])
            elif entry[0] == truth and entry[2]:
                met.setdefault("fill_from_replica_behind_other_change", set()).add(x["order"])
            if x["quote"] and prices.effective(sku, x["ts"])[0] != truth:
                met.setdefault("quote_honoured_after_change", set()).add(x["order"])
            if kinds is not None and any(com <= t < eff for _, com, _, _, eff in prices.by_sku.get(sku, ())):
                met.setdefault("scheduled_change_not_yet_effective", set()).add(x["order"])
    repeated = set()
    write_folder(folder, orders, cache_lines, prices.changes, rng, repeated)
    if kinds is not None:
        kinds.update({name: len(ids) for name, ids in met.items()}, repeated_order_line=len(repeated))
    return labels


def write_folder(folder: str, orders: list[dict], cache_lines: list[tuple[float, str]], changes: list,
                 rng: random.Random | None = None, repeated: set | None = None):
    """Write orders, (ts, text) cache lines and commit-log changes in the production layout under folder.
    repeated: the orders whose line was shipped twice are added to it."""
    rng = rng or random.Random(0)
    for sub in ("orders", "cache", "db"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    by_hour = {}
    for o in orders:
        by_hour.setdefault(int((o["ts"] - START) // 3600), []).append(o)
    for hour, group in sorted(by_hour.items()):
        group.sort(key=lambda o: o["ts"])
        n = len(group)
        group += [dict(o) for o in group if rng.random() < 0.12]  # at-least-once shipping
        if repeated is not None:
            repeated.update(o["order"] for o in group[n:])
        with open(os.path.join(folder, "orders", "orders-d%d-h%02d.jsonl" % (hour // 24, hour % 24)), "w") as f:
            f.writelines(json.dumps(o, separators=(",", ":")) + "\n" for o in group)
    by_node = {}
    for ts, text in cache_lines:
        by_node.setdefault((text.split()[1], int((ts - START) // 3600)), []).append((ts, text))
    for (node, hour), group in sorted(by_node.items()):
        group.sort()
        with open(os.path.join(folder, "cache", "%s-d%d-h%02d.log" % (node, hour // 24, hour % 24)), "w") as f:
            f.writelines(text + "\n" for _, text in group)
    by_day = {}
    for lsn, com, sku, cents, eff in changes:
        by_day.setdefault(int((com - START) // 86400), []).append(
            {"lsn": lsn, "committed": round(com, 3), "sku": sku, "unit_cents": cents, "effective": round(eff, 3)})
    for day, rows in sorted(by_day.items()):
        with open(os.path.join(folder, "db", "prices-d%d.csv" % day), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=DB_FIELDS)
            w.writeheader()
            w.writerows(rows)


def _build(repo: str) -> None:
    """The pinned release and its history (the shared sdist_repo.py, a byte-identical copy next to this file)."""
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("sdist_repo", os.path.join(here, "sdist_repo.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build(repo)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: generate.py REPO")
    _build(sys.argv[1])
    write_logs(os.path.join(sys.argv[1], "logs"))
