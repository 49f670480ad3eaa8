"""Orders whose payment committed but whose fulfilment read the order before that commit, saw it pending and
skipped it (incident INC-5127, "paid but never shipped").

The checkout's log (logs/checkout) says which transaction saved an order as paid and when the fulfil_order message
for it was sent; the database's commit timestamps (logs/db) say whether and when that transaction committed (a
declined payment rolls back and has no row). The workers' logs (logs/workers) hold the actor's verdicts: an order
skipped as pending after its paid save's message was sent and before that save committed was read too early, and
nothing fulfils it later. Orders merely read too early while new (retried), pending orders, warehouse errors and
repeated log lines are not hurt.
"""

import csv
import datetime
import json
import os
import re

SKIP = re.compile(r"order (\d+): status pending, not fulfilling")


def _worker_time(line):
    return datetime.datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def _json_time(stamp):
    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def _commits(log_dir):
    """{txid: commit time}."""
    out = {}
    folder = os.path.join(log_dir, "db")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), newline="") as f:
            for row in csv.DictReader(f):
                out[int(row["txid"])] = datetime.datetime.strptime(
                    row["committed_at"].replace("+00", "+0000"), "%Y-%m-%d %H:%M:%S.%f%z").timestamp()
    return out


def _paid_sends(log_dir, commits):
    """{order: [(message sent, commit)]} for the saves as paid that committed."""
    paid, sent = {}, {}
    folder = os.path.join(log_dir, "checkout")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                if '"order.saved"' not in line and '"message.sent"' not in line:
                    continue
                rec = json.loads(line)
                if rec["event"] == "order.saved" and rec["status"] == "paid":
                    paid[rec["txid"]] = rec["order"]
                elif rec["event"] == "message.sent":
                    sent[rec["txid"]] = _json_time(rec["ts"])
    out = {}
    for txid, order in paid.items():
        if txid in commits and txid in sent:
            out.setdefault(order, []).append((sent[txid], commits[txid]))
    return out


def _skips(log_dir, wanted):
    """{order: [times the actor skipped it as pending]} for the orders in wanted."""
    out = {}
    folder = os.path.join(log_dir, "workers")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                if "not fulfilling" not in line:
                    continue
                m = SKIP.search(line)
                if m and int(m.group(1)) in wanted:
                    out.setdefault(int(m.group(1)), []).append(_worker_time(line))
    return out


def unshipped_paid_orders(log_dir):
    """The sorted ids (int) of the orders whose paid commit was read as pending by the fulfilment and skipped."""
    sends = _paid_sends(log_dir, _commits(log_dir))
    skips = _skips(log_dir, sends)
    hurt = set()
    for order, times in skips.items():
        for sent, commit in sends[order]:
            if any(sent - 0.001 <= t <= commit + 0.001 for t in times):
                hurt.add(order)
    return sorted(hurt)
