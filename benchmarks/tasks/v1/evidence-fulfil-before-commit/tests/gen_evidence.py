"""A week of a shop's checkout logs, its dramatiq workers' logs and the database's commit timestamps, from a seed.

    python generate.py REPO     builds REPO from its pinned dramatiq release and history (sdist_repo.py, a copy of
                                the suite's shared script next to this file), then writes REPO/logs/ (seed 7,
                                24,000 orders: ≈ 1,180 files, ≈ 50 MB). Stdlib only.

Three sources, joined by order, message id, transaction id and time:
  logs/checkout/WEB-dDAY-hHOUR.jsonl   the checkout service's JSON log: requests, `order.saved` (order, status,
                                       txid, cart), `message.sent` (the fulfil_order message: id, order, txid),
                                       `request.done` (HTTP status: 402 when the payment was declined)
  logs/workers/HOST-dDAY-hHOUR.log     the dramatiq workers (`[2023-12-11 00:00:01,234] [PID n] [Thread-n]
                                       [logger] [LEVEL] message`, DEBUG on): `Received message fulfil_order(ORDER)
                                       with id 'ID'.`, the actor's own lines (`order N: sent to warehouse ...`,
                                       `order N: status pending, not fulfilling`), failures with their tracebacks,
                                       Retries' `Retrying message ...` / `Retries exceeded ...`; shipped at least
                                       once, so a line can repeat
  logs/db/commits-dDAY.csv             the orders database's commit timestamps (track_commit_timestamp): txid,
                                       committed_at; a rolled-back transaction has no row

The bug (in the checkout service, in no repository; fixed in production at a point of the week): the fulfil_order
message was sent inside the order's database transaction, so a worker could read the order before the commit. A new
order is then missing (DoesNotExist; Retries tries again later: harmless), but an order that already existed as
`pending` (paid later: bank transfer, 3-D Secure) is read as pending, skipped, and the payment's commit is never
fulfilled. After the fix the message is sent after the commit. An order is hurt when its paid commit's message was
read before that commit. Harmless anomalies: pending orders skipped as designed, new orders read before their commit
and retried, warehouse errors retried (an outage exhausts the retries; on-call replays the dead letters the next
morning), messages of declined payments (rolled back: a new order never appears, a pending one is skipped), repeated
log lines.

The verifier's setup.py imports this file (a copy in tests/) to draw fresh weeks with other seeds and fix times;
`write_logs` returns the true labels ({order id: hurt}); given a dict as `kinds`, it also fills in the
harmless anomaly kinds drawn ({kind: orders}, or (lines, all lines, unit) for the repeated lines) for
benchmarks/evidence_stats.py.
"""

from __future__ import annotations

import bisect
import collections
import csv
import datetime
import json
import math
import os
import random
import sys
import uuid

START = 1_702_252_800  # 2023-12-11T00:00:00Z
WEEK = 7 * 86400
WEBS = ("web1", "web2", "web3")
STATS = collections.Counter()  # what the last write_logs drew, by kind (for the docs' measurements)
MET = {}  # what the last write_logs drew, by kind: the units that met it (for benchmarks/evidence_stats.py)
LINES = ("repeated worker lines", "worker lines")  # the repeated lines and all lines of their source


def _tally(kind, unit):
    STATS[kind] += 1
    MET.setdefault(kind, set()).add(unit)


HOSTS = ("wk1", "wk2", "wk3", "wk4")
THREADS = 8
MAX_RETRIES = 4
MIN_BACKOFF = 15.0
WAREHOUSES = ("wh-ams", "wh-fra", "wh-lyo")
SKUS = tuple("SKU-%05d" % k for k in range(0, 99_000, 97))
PATHS = ("/api/cart", "/api/products/%d", "/api/shipping/quote", "/api/account", "/api/search?q=%s")
AGENTS = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/119.0 Safari/537.36",
          "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148",
          "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_1) AppleWebKit/605.1.15 Version/17.1 Safari/605.1.15",
          "shop-app/5.12.0 (Android 14; Pixel 7)")
TRACE_MISSING = (
    "Traceback (most recent call last):",
    '  File "/srv/shop/venv/lib/python3.11/site-packages/dramatiq/worker.py", line 485, in process_message',
    "    res = actor(*message.args, **message.kwargs)",
    '  File "/srv/shop/shop/fulfilment/actors.py", line 41, in fulfil_order',
    "    order = Order.objects.select_related(\"customer\").get(pk=order_id)",
    "shop.orders.models.Order.DoesNotExist: Order matching query does not exist.")
TRACE_WAREHOUSE = (
    "Traceback (most recent call last):",
    '  File "/srv/shop/venv/lib/python3.11/site-packages/dramatiq/worker.py", line 485, in process_message',
    "    res = actor(*message.args, **message.kwargs)",
    '  File "/srv/shop/shop/fulfilment/actors.py", line 52, in fulfil_order',
    "    pick = warehouse.create_pick(order)",
    '  File "/srv/shop/shop/fulfilment/warehouse.py", line 88, in create_pick',
    "    raise WarehouseError(resp.status_code, resp.text[:200])",
    "shop.fulfilment.warehouse.WarehouseError: (503, 'upstream unavailable')")


def wstamp(t: float) -> str:
    """A worker log line's time (Python logging's asctime, UTC)."""
    d = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    return d.strftime("%Y-%m-%d %H:%M:%S") + ",%03d" % (d.microsecond // 1000)


def jstamp(t: float) -> str:
    """The checkout's JSON time (microseconds, Z)."""
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def dbstamp(t: float) -> str:
    """PostgreSQL's timestamptz text (microseconds, +00)."""
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f") + "+00"


def _episodes(rng, n, length):
    out = []
    for _ in range(rng.randint(*n)):
        s = START + rng.uniform(-3600, WEEK)
        out.append((s, s + rng.uniform(*length)))
    return sorted(out)


def _inside(spans, t):
    k = bisect.bisect_right(spans, (t, float("inf"))) - 1
    return k >= 0 and spans[k][0] <= t < spans[k][1]


class Week:
    """Collects the three sources' records."""

    def __init__(self, rng):
        self.rng = rng
        self.web = []  # (t, web, record)
        self.work = []  # (t, host, text)
        self.commits = []  # (t, txid)
        self.pids = {h: rng.randrange(300, 30_000) for h in HOSTS}

    def wlog(self, t, host, thread, logger, level, text):
        self.work.append((t, host, "[%s] [PID %d] [%s] [%s] [%s] %s" % (
            wstamp(t), self.pids[host], thread, logger, level, text)))

    def jlog(self, t, web, event, **fields):
        self.web.append((t, web, dict({"ts": jstamp(t), "level": "info", "logger": "shop.checkout",
                                       "host": web, "event": event}, **fields)))


def write_logs(folder: str, seed: int = 7, count: int = 24_000, fixed_at: float | None = None,
               kinds: dict | None = None) -> dict:
    """Write a week under folder/{checkout,workers,db}; {order id: its paid commit was read as pending}.
    fixed_at (UTC seconds): when the checkout started sending messages after the commit (default: day 2 or 3).
    kinds: filled with the harmless anomaly kinds drawn (module docstring)."""
    rng = random.Random(seed)
    STATS.clear()
    MET.clear()
    if fixed_at is None:
        fixed_at = START + WEEK * rng.uniform(0.3, 0.42)
    w = Week(rng)
    db_busy = _episodes(rng, (14, 22), (600, 5400))  # lock contention: slow commits
    backlog = _episodes(rng, (6, 10), (300, 1800))  # the queue falls behind: slow pickup
    outages = _episodes(rng, (3, 5), (900, 4800))  # the warehouse API answers 503
    saves, labels = [], {}
    ids = rng.sample(range(4_100_000, 4_900_000), count)
    for order in ids:
        t1 = START + rng.uniform(0, WEEK - 120)
        cart = [{"sku": rng.choice(SKUS), "qty": rng.randint(1, 3), "price": rng.randrange(199, 24_900)}
                for _ in range(rng.randint(1, 5))]
        customer = "cus_%010x" % rng.getrandbits(40)
        labels[order] = False
        if rng.random() < 0.17:  # paid later: saved pending, then paid or declined
            saves.append((t1, order, "pending", True, cart, customer))
            t2 = t1 + rng.uniform(900, 30 * 3600)
            if t2 < START + WEEK - 60:
                saves.append((t2, order, "paid" if rng.random() < 0.85 else "declined", False, cart, customer))
        else:
            saves.append((t1, order, "paid" if rng.random() < 0.97 else "declined", True, cart, customer))
    saves.sort(key=lambda s: s[0])
    committed = {}  # order -> [(commit time, status)]
    txid = rng.randrange(88_000_000, 89_000_000)
    jobs = []
    for t, order, status, new, cart, customer in saves:
        txid += rng.randint(3, 40)
        web = rng.choice(WEBS)
        req = "req_%016x" % rng.getrandbits(64)
        for _ in range(rng.randint(0, 2)):  # the customer's browsing before the checkout
            tb = t - rng.uniform(5, 900)
            path = rng.choice(PATHS)
            path = path % (rng.randrange(10**5) if "%d" in path else rng.choice(("boots", "lamp", "desk", "mug")))\
                if "%" in path else path
            w.jlog(tb, rng.choice(WEBS), "request.done", request_id="req_%016x" % rng.getrandbits(64),
                   method="GET", path=path, http_status=rng.choice((200, 200, 200, 200, 304, 404)),
                   duration_ms=rng.randint(3, 180), customer=customer, user_agent=rng.choice(AGENTS))
        busy = _inside(db_busy, t)
        saved = t + rng.uniform(0.005, 0.04)
        w.jlog(saved, web, "order.saved", request_id=req, order=order, status="paid" if status == "declined"
               else status, txid=txid, customer=customer, cart=cart,
               total=sum(c["qty"] * c["price"] for c in cart), currency="EUR")
        delay = rng.lognormvariate(math.log(0.35 if busy else 0.022), 0.9)
        mid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        if saved < fixed_at:  # the bug: sent inside the transaction
            sent = saved + rng.uniform(0.001, 0.01)
            end = sent + delay
        else:
            end = saved + delay
            sent = end + rng.uniform(0.0005, 0.003)
        if status == "declined":
            w.jlog(end, web, "payment.declined", request_id=req, order=order, txid=txid,
                   reason=rng.choice(("insufficient_funds", "do_not_honor", "expired_card", "3ds_failed")))
            w.jlog(end + 0.002, web, "request.done", request_id=req, method="POST", path="/api/checkout",
                   http_status=402, duration_ms=int((end - t) * 1000) + 2, customer=customer,
                   user_agent=rng.choice(AGENTS))
            if saved < fixed_at:
                w.jlog(sent, web, "message.sent", request_id=req, actor="fulfil_order", queue="fulfilment",
                       message_id=mid, order=order, txid=txid)
                jobs.append((sent, order, mid, None, None))
            continue
        w.commits.append((end, txid))
        committed.setdefault(order, []).append((end, status))
        w.jlog(sent, web, "message.sent", request_id=req, actor="fulfil_order", queue="fulfilment",
               message_id=mid, order=order, txid=txid)
        w.jlog(max(sent, end) + 0.001, web, "request.done", request_id=req, method="POST", path="/api/checkout",
               http_status=200, duration_ms=int((max(sent, end) - t) * 1000) + 1, customer=customer,
               user_agent=rng.choice(AGENTS))
        jobs.append((sent, order, mid, status, end))
    for o in committed:
        committed[o].sort()
    dead = []
    for sent, order, mid, status, commit_t in jobs:
        host, thread = rng.choice(HOSTS), "Thread-%d" % rng.randint(1, THREADS)
        lat = rng.uniform(20, 300) if _inside(backlog, sent) else rng.expovariate(1 / 0.03) + 0.002
        p = sent + lat
        retries = 0
        while True:
            if p >= START + WEEK:
                break
            host, thread = rng.choice(HOSTS), "Thread-%d" % rng.randint(1, THREADS)
            w.wlog(p, host, thread, "dramatiq.worker.WorkerThread", "DEBUG",
                   "Received message fulfil_order(%d) with id %r." % (order, mid))
            r = p + rng.uniform(0.0005, 0.003)
            seen = None
            for ct, st in committed.get(order, ()):
                if ct <= r:
                    seen = st
            done = r + rng.uniform(0.001, 0.004)
            failure = None
            if seen is None:
                failure = TRACE_MISSING
                _tally("new read before commit" if status is not None else "declined new order missing", order)
            elif seen == "pending":
                w.wlog(r, host, thread, "shop.fulfilment.actors", "INFO",
                       "order %d: status pending, not fulfilling" % order)
                if status == "paid" and commit_t is not None and r < commit_t:
                    labels[order] = True  # the paid commit's message, read before the commit
                    _tally("hurt", order)
                else:
                    _tally("pending skipped" if status == "pending" else "declined read as pending", order)
            elif _inside(outages, r) or rng.random() < 0.12:
                done = r + (rng.uniform(2, 10) if rng.random() < 0.5 else rng.uniform(0.05, 0.4))
                failure = TRACE_WAREHOUSE
                _tally("warehouse error", order)
            else:
                done = r + rng.uniform(0.08, 0.6)
                w.wlog(done, host, thread, "shop.fulfilment.actors", "INFO",
                       "order %d: sent to warehouse %s (pick %s)" % (order, rng.choice(WAREHOUSES),
                                                                      "PK%09d" % rng.randrange(10**9)))
            if failure is None:
                w.wlog(done + 0.0005, host, "ConsumerThread(fulfilment)", "dramatiq.worker.ConsumerThread",
                       "DEBUG", "Acknowledging message %r." % mid)
                break
            w.wlog(done, host, thread, "dramatiq.worker.WorkerThread", "ERROR",
                   "Failed to process message fulfil_order(%d) with unhandled exception.\n%s" % (
                       order, "\n".join(failure)))
            if retries >= MAX_RETRIES:
                w.wlog(done + 0.0003, host, thread, "dramatiq.middleware.retries.Retries", "WARNING",
                       "Retries exceeded for message %r." % mid)
                w.wlog(done + 0.0008, host, "ConsumerThread(fulfilment)", "dramatiq.worker.ConsumerThread",
                       "DEBUG", "Rejecting message %r." % mid)
                if failure is TRACE_WAREHOUSE:
                    dead.append((done, order))
                break
            retries += 1
            backoff = MIN_BACKOFF * 2 ** (retries - 1) * rng.uniform(1.0, 1.25)
            w.wlog(done + 0.0003, host, thread, "dramatiq.middleware.retries.Retries", "INFO",
                   "Retrying message %r in %d milliseconds." % (mid, int(backoff * 1000)))
            p = done + backoff + rng.expovariate(1 / 0.05)
    for done, order in dead:  # on-call replays the warehouse's dead letters the next morning (a new message)
        day = int((done - START) // 86400) + 1
        p = START + day * 86400 + 9 * 3600 + rng.uniform(0, 1800)
        if p >= START + WEEK:
            continue
        mid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        _tally("dead letter replayed", order)
        host, thread = rng.choice(HOSTS), "Thread-%d" % rng.randint(1, THREADS)
        w.wlog(p, host, thread, "dramatiq.worker.WorkerThread", "DEBUG",
               "Received message fulfil_order(%d) with id %r." % (order, mid))
        done = p + rng.uniform(0.08, 0.6)
        w.wlog(done, host, thread, "shop.fulfilment.actors", "INFO", "order %d: sent to warehouse %s (pick %s)" % (
            order, rng.choice(WAREHOUSES), "PK%09d" % rng.randrange(10**9)))
        w.wlog(done + 0.0005, host, "ConsumerThread(fulfilment)", "dramatiq.worker.ConsumerThread", "DEBUG",
               "Acknowledging message %r." % mid)
    write_folder(folder, w.web, w.work, w.commits, rng)
    if kinds is not None:
        kinds.update({name: len(units & labels.keys()) for name, units in MET.items() if name != "hurt"})
        kinds[LINES[0]] = (STATS[LINES[0]], STATS[LINES[1]], LINES[1])
    return labels


def write_folder(folder: str, web: list, work: list, commits: list, rng: random.Random | None = None):
    """Write (t, web, record) checkout records, (t, host, text) worker lines and (t, txid) commits in the production
    layout under folder (records outside the week are dropped, as the week's export would)."""
    rng = rng or random.Random(0)
    for sub in ("checkout", "workers", "db"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    files = {}
    for t, web, rec in web:
        hour = int((t - START) // 3600)
        if 0 <= hour < 168:
            files.setdefault(("checkout", "%s-d%d-h%02d.jsonl" % (web, hour // 24, hour % 24)), []).append(
                (t, json.dumps(rec, separators=(",", ":"))))
    for t, host, text in work:
        hour = int((t - START) // 3600)
        if 0 <= hour < 168:
            files.setdefault(("workers", "%s-d%d-h%02d.log" % (host, hour // 24, hour % 24)), []).append((t, text))
    for (sub, name), group in sorted(files.items()):
        group.sort(key=lambda x: x[0])
        if sub == "workers":  # at-least-once shipping
            group = [x for x in group for _ in range(2 if rng.random() < 0.05 else 1)]
            STATS["repeated worker lines"] += len(group) - len(set(group))
            STATS["worker lines"] += len(group)
        with open(os.path.join(folder, sub, name), "w") as f:
            f.writelines(text + "\n" for _, text in group)
    days = {}
    for t, txid in sorted(commits):
        day = int((t - START) // 86400)
        if 0 <= day < 7:
            days.setdefault(day, []).append((txid, dbstamp(t)))
    for day, rows in sorted(days.items()):
        with open(os.path.join(folder, "db", "commits-d%d.csv" % day), "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(("txid", "committed_at"))
            out.writerows(rows)


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
