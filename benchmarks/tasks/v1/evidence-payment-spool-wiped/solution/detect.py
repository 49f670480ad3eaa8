"""Paid orders whose payment callback a webhook relay lost (incident PAY-3318, "charged but still unpaid").

The relays' logs (logs/relay, one file per node and day, in time order) follow each callback by queue id; the
`accepted` line names the PSP event and its payment intent, which the shop's `order.created` record (logs/orders)
ties to the order. A callback whose last forward attempt was spooled (the app answered 503 or 500) and that was
never delivered, rejected or handed on (a restarting node moves its spool to another node under a new queue id,
same event, and logs the old queue id `removed`) was lost if its node stopped (`caught SIGTERM`) after that attempt.
503s and 500s retried later, 409s for cancelled orders, gift-card orders, waitress's queue-depth warnings and
callbacks still spooled when the week's logs end are not lost.
"""

import json
import os
import re

LINE = re.compile(r"^\w{3} [ \d]\d \d\d:\d\d:\d\d (\S+) hookrelay\[\d+\]: (.*)$")
ACCEPTED = re.compile(r"^(\w+): accepted (\S+) type=\S+ object=(\S+)")
ATTEMPT = re.compile(r"^(\w+): POST \S+ via \S+ attempt=\d+ status=\d+ result=(\w+)")
REMOVED = re.compile(r"^(\w+): removed$")


def _relay_files(log_dir):
    """{node: [paths in day order]}."""
    out = {}
    folder = os.path.join(log_dir, "relay")
    for name in os.listdir(folder):
        node, day = name[:-len(".log")].rsplit("-d", 1)
        out.setdefault(node, []).append((int(day), os.path.join(folder, name)))
    return {node: [p for _, p in sorted(paths)] for node, paths in out.items()}


def _orders(log_dir):
    """{payment intent: order id} from the shop's order records."""
    out = {}
    folder = os.path.join(log_dir, "orders")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                if '"order.created"' in line:
                    rec = json.loads(line)
                    if rec.get("payment_intent"):
                        out[rec["payment_intent"]] = rec["order_id"]
    return out


def lost_payments(log_dir):
    """The sorted order ids (str) whose spooled payment callback a relay restart wiped."""
    pi_of, done = {}, set()
    last = {}  # payment intent -> (node, qid, position of its last spooled attempt)
    removed, stops = set(), {}
    for node, paths in _relay_files(log_dir).items():
        pos = 0
        stops[node] = []
        for path in paths:
            with open(path) as f:
                for raw in f:
                    pos += 1
                    m = LINE.match(raw.rstrip("\n"))
                    if not m:
                        continue
                    text = m.group(2)
                    if text.startswith("caught SIGTERM"):
                        stops[node].append(pos)
                        continue
                    mm = ACCEPTED.match(text)
                    if mm:
                        pi_of[(node, mm.group(1))] = mm.group(3)
                        continue
                    mm = REMOVED.match(text)
                    if mm:
                        removed.add((node, mm.group(1)))
                        continue
                    mm = ATTEMPT.match(text)
                    if mm and (node, mm.group(1)) in pi_of:
                        pi = pi_of[(node, mm.group(1))]
                        if mm.group(2) == "spooled":
                            last[pi] = (node, mm.group(1), pos)
                        else:
                            done.add(pi)
    order_of = _orders(log_dir)
    hurt = []
    for pi, (node, qid, pos) in last.items():
        if pi in done or (node, qid) in removed or pi not in order_of:
            continue
        if any(s > pos for s in stops[node]):
            hurt.append(order_of[pi])
    return sorted(hurt)
