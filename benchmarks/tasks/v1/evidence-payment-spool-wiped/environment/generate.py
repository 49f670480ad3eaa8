"""A week of a shop's orders, its waitress app servers' logs and the webhook relays' logs, from a seed.

    python generate.py REPO     builds REPO from its pinned waitress release and history (sdist_repo.py, a copy of
                                the suite's shared script next to this file), then writes REPO/logs/ (seed 13,
                                30,000 orders: ≈ 870 files). Stdlib only.

Three sources, joined by payment intent (the shop's order names it; the relay's `accepted` line names the PSP event
and its payment intent) and time:
  logs/orders/WEB-dDAY-hHOUR.jsonl  the shop's JSON log: requests and `order.created` (order id, payment intent or
                                    a gift card, amount)
  logs/app/HOST-dDAY-hHOUR.log      the waitress app servers (Python logging: `YYYY-MM-DD HH:MM:SS,mmm LEVEL
                                    [logger] message`): callbacks applied (`order ORD marked paid`), answered 503
                                    while a checkout request held the order's lock, answered 409 for a cancelled
                                    order, 500s with waitress's `Exception while serving` traceback, waitress's own
                                    `Task queue depth is N` warnings in bursts; shipped at least once
  logs/relay/RELAY-dDAY.log         the webhook relays (syslog): `accepted` (event, type, payment intent), each
                                    forward attempt (`result=delivered`, `spooled`, `rejected`), `removed`,
                                    stop/start; after the fix a node being restarted first hands its spool to
                                    another node (a new queue id there, the same event)

The bug (in the payments platform's relay deployment, in no repository; fixed at a point of the week): a relay
restart (deploys, every few hours) wiped the node's retry spool, so a callback the app had answered 503 or 500 and
that was not yet retried was lost: the card was charged, the order stayed unpaid. After the fix, the node hands its
spool to another node before it stops. An order is hurt when the restart wiped its callback. Harmless anomalies:
503s (the order's lock) retried and delivered, 500s retried and delivered, callbacks served during waitress
queue-depth warnings (and bursts of them), spooled callbacks handed over at a restart (after the fix), 409s for
cancelled orders, gift-card orders (no callback), callbacks still spooled when the week ends, repeated app lines.

The verifier's setup.py imports this file (a copy in tests/) to draw fresh weeks with other seeds and fix times;
`write_logs` returns the true labels ({order id: hurt}); given a dict as `kinds`, it also fills in the
harmless anomaly kinds drawn ({kind: orders}, or (lines, all lines, unit) for the repeated lines) for
benchmarks/evidence_stats.py.
"""

from __future__ import annotations

import bisect
import collections
import datetime
import json
import os
import random
import sys

START = 1_702_252_800  # 2023-12-11T00:00:00Z
WEEK = 7 * 86400
WEBS = ("shop1", "shop2")
HOSTS = ("app1", "app2", "app3")
RELAYS = ("hook-a", "hook-b", "hook-c")
URL = "https://shop.example/webhooks/payments"
STATS = collections.Counter()  # what the last write_logs drew, by kind (for the docs' measurements)
MET = {}  # what the last write_logs drew, by kind: the units that met it (for benchmarks/evidence_stats.py)
LINES = ("repeated app lines", "app lines")  # the repeated lines and all lines of their source


def _tally(kind, unit):
    STATS[kind] += 1
    MET.setdefault(kind, set()).add(unit)


TRACE = ("Traceback (most recent call last):",
         '  File "/srv/shop/venv/lib/python3.11/site-packages/waitress/channel.py", line 428, in service',
         "    task.service()",
         '  File "/srv/shop/app/webhooks.py", line 61, in payment_callback',
         "    db.execute(MARK_PAID, order_id)",
         "psycopg2.OperationalError: server closed the connection unexpectedly")


def lstamp(t: float) -> str:
    """A Python logging time, `2023-12-11 00:00:01,123`."""
    d = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    return d.strftime("%Y-%m-%d %H:%M:%S") + ",%03d" % (d.microsecond // 1000)


def syslog(t: float) -> str:
    """A syslog line's time, `Dec 11 00:00:01` (the week's days are all two-digit)."""
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%b %d %H:%M:%S")


def jstamp(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _qid(rng):
    return "".join(rng.choice("0123456789ABCDEFGHJKLMNPQRSTVWXYZ") for _ in range(10))


class Week:
    def __init__(self, rng):
        self.rng, self.web, self.app, self.relay = rng, [], [], []
        self.pids = {r: rng.randrange(900, 1500) for r in RELAYS}

    def jlog(self, t, web, event, **fields):
        self.web.append((t, web, dict({"ts": jstamp(t), "level": "info", "host": web, "event": event}, **fields)))

    def alog(self, t, host, level, logger, text):
        self.app.append((t, host, "%s %s [%s] %s" % (lstamp(t), level, logger, text)))

    def rlog(self, t, relay, text):
        self.relay.append((t, relay, "%s %s hookrelay[%d]: %s" % (syslog(t), relay, self.pids[relay], text)))


def write_logs(folder: str, seed: int = 13, count: int = 30_000, fixed_at: float | None = None,
               kinds: dict | None = None) -> dict:
    """Write a week under folder/{orders,app,relay}; {order id: its spooled callback wiped by a relay restart}.
    fixed_at (UTC seconds): from when a restarting node hands its spool over (default: day 2 or 3).
    kinds: filled with the harmless anomaly kinds drawn (module docstring)."""
    rng = random.Random(seed)
    STATS.clear()
    MET.clear()
    if fixed_at is None:
        fixed_at = START + WEEK * rng.uniform(0.28, 0.4)
    w = Week(rng)
    restarts = {r: [] for r in RELAYS}
    for r in RELAYS:
        t = START + rng.uniform(0, 3600)
        while t < START + WEEK:
            restarts[r].append(t)
            t += rng.uniform(1.2, 3.0) * 3600
    for h in HOSTS:  # waitress's queue-depth warnings, in bursts
        t = START + rng.uniform(0, 3600)
        while t < START + WEEK:
            for k in range(rng.randint(3, 30)):
                w.alog(t + k * rng.uniform(0.5, 3), h, "WARNING", "waitress.queue", "Task queue depth is %d"
                       % rng.randint(1, 40))
            STATS["queue-depth bursts"] += 1
            t += rng.uniform(0.3, 1.5) * 3600
    orders, labels = [], {}
    for _ in range(count):
        t = START + rng.uniform(0, WEEK - 30)
        order = "ord_%s" % "".join(rng.choice("0123456789abcdefghijklmnopqrstuvwxyz") for _ in range(14))
        user = rng.randrange(10_000, 900_000)
        labels[order] = False
        for _ in range(rng.randint(0, 2)):
            w.jlog(t - rng.uniform(1, 600), rng.choice(WEBS), "request.done", method="GET",
                   path=rng.choice(("/cart", "/checkout", "/account/orders", "/api/cart")),
                   http_status=rng.choice((200, 200, 200, 302, 304)), duration_ms=rng.randint(3, 200), user=user,
                   request_id="req_%016x" % rng.getrandbits(64))
        amount = rng.randint(500, 40_000)
        if rng.random() < 0.15:
            _tally("gift-card orders", order)
            w.jlog(t, rng.choice(WEBS), "order.created", order_id=order, user=user, amount=amount, currency="EUR",
                   payment="gift_card", request_id="req_%016x" % rng.getrandbits(64))
            w.alog(t + 0.05, rng.choice(HOSTS), "INFO", "app.orders", "order %s paid by gift card" % order)
            continue
        pi = "pi_%s" % "".join(rng.choice("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
                               for _ in range(24))
        w.jlog(t, rng.choice(WEBS), "order.created", order_id=order, user=user, amount=amount, currency="EUR",
               payment="card", payment_intent=pi, request_id="req_%016x" % rng.getrandbits(64))
        orders.append((t, order, pi))
    for t, order, pi in orders:
        evt = "evt_%s" % "".join(rng.choice("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
                                 for _ in range(24))
        relay = rng.choice(RELAYS)
        qid = _qid(rng)
        a = t + rng.uniform(2, 40)
        w.rlog(a, relay, "%s: accepted %s type=payment_intent.succeeded object=%s from=psp-edge" % (qid, evt, pi))
        cancelled = rng.random() < 0.12
        s = a + rng.uniform(0.05, 0.5)
        spooled = attempt = 0
        seen = set()
        while True:
            if s >= START + WEEK:
                _tally("spooled at the week's end", order)
                break
            attempt += 1
            host = rng.choice(HOSTS)
            head = "%s: POST %s via %s attempt=%d" % (qid, URL, host, attempt)
            if cancelled:
                w.alog(s - 0.01, host, "INFO", "app.webhooks", "%s %s: order %s was cancelled; refund issued, "
                       "answered 409" % (evt, pi, order))
                w.rlog(s, relay, head + " status=409 result=rejected")
                w.rlog(s + 0.01, relay, "%s: removed" % qid)
                _tally("409 cancelled orders", order)
                break
            r = rng.random()
            fail = None
            if r < (0.08 if attempt == 1 else 0.03):
                fail = 500
            elif r < (0.21 if attempt == 1 else 0.06):
                fail = 503
            if fail:
                if fail == 500:
                    w.alog(s - 0.01, host, "ERROR", "waitress", "Exception while serving /webhooks/payments\n%s"
                           % "\n".join(TRACE))
                    seen.add("500 then delivered")
                else:
                    w.alog(s - 0.01, host, "WARNING", "app.webhooks", "%s %s: order %s is locked by a checkout "
                           "request; answered 503" % (evt, pi, order))
                    seen.add("503 then delivered")
                spooled += 1
                wait = rng.uniform(300, 4000)
                w.rlog(s, relay, head + " status=%d result=spooled retry_in=%ds" % (fail, wait))
                nxt = s + wait
                k = bisect.bisect_right(restarts[relay], s)
                cut = restarts[relay][k] if k < len(restarts[relay]) else None
                if cut is not None and cut < nxt:
                    if cut < fixed_at:  # the bug: the restart wipes the spool
                        labels[order] = True
                        _tally("hurt", order)
                        break
                    other = rng.choice([x for x in RELAYS if x != relay])  # the fix: handed over first
                    nq = _qid(rng)
                    w.rlog(cut - 0.5, relay, "%s: removed" % qid)
                    w.rlog(cut - 0.4, other, "%s: accepted %s type=payment_intent.succeeded object=%s from=%s"
                           % (nq, evt, pi, relay))
                    _tally("handed over at a restart", order)
                    relay, qid, attempt = other, nq, 0
                s = nxt
                continue
            if rng.random() < 0.15:  # served while the app server's waitress queue was backed up
                for k in range(rng.randint(1, 4)):
                    w.alog(s - rng.uniform(0.05, 20), host, "WARNING", "waitress.queue", "Task queue depth is %d"
                           % rng.randint(2, 40))
                seen.add("delivered during a queue backlog")
            w.alog(s - 0.01, host, "INFO", "app.webhooks", "%s %s: order %s marked paid" % (evt, pi, order))
            w.rlog(s, relay, head + " status=200 result=delivered")
            w.rlog(s + 0.01, relay, "%s: removed" % qid)
            for k in seen:
                _tally(k, order)
            break
    for r in RELAYS:
        for cut in restarts[r]:
            w.rlog(cut, r, "caught SIGTERM, stopping")
            w.pids[r] = rng.randrange(900, 30000)
            w.rlog(cut + rng.uniform(1.5, 4), r, "hookrelay 2.4.1 started, spool /var/spool/hookrelay")
    write_folder(folder, w.web, w.app, w.relay, rng)
    if kinds is not None:
        kinds.update({name: len(units & labels.keys()) for name, units in MET.items() if name != "hurt"})
        kinds[LINES[0]] = (STATS[LINES[0]], STATS[LINES[1]], LINES[1])
    return labels


def write_folder(folder: str, web: list, app: list, relay: list, rng: random.Random | None = None):
    """Write (t, web, record) shop records, (t, host, text) app lines and (t, relay, text) relay lines in the
    production layout under folder (records outside the week are dropped, as the week's export would)."""
    rng = rng or random.Random(0)
    for sub in ("orders", "app", "relay"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    files = collections.defaultdict(list)
    for t, web, rec in web:
        h = int((t - START) // 3600)
        if 0 <= h < 168:
            files[("orders", "%s-d%d-h%02d.jsonl" % (web, h // 24, h % 24))].append((t, json.dumps(rec, separators=(
                ",", ":"))))
    for t, host, text in app:
        h = int((t - START) // 3600)
        if 0 <= h < 168:
            files[("app", "%s-d%d-h%02d.log" % (host, h // 24, h % 24))].append((t, text))
    for t, r, text in relay:
        d = int((t - START) // 86400)
        if 0 <= d < 7:
            files[("relay", "%s-d%d.log" % (r, d))].append((t, text))
    for (sub, name), group in sorted(files.items()):
        group.sort(key=lambda x: x[0])
        if sub == "app":  # at-least-once shipping
            n = len(group)
            group = [x for x in group for _ in range(2 if rng.random() < 0.06 else 1)]
            STATS["repeated app lines"] += len(group) - n
            STATS["app lines"] += len(group)
        with open(os.path.join(folder, sub, name), "w") as f:
            f.writelines(text + "\n" for _, text in group)


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
