"""Purchases charged more than once.

A purchase is one Idempotency-Key (`key` on the gateway's POST /v1/charges lines). Every upstream attempt, the
gateway's retries and the client's own retries under a new request id alike, carries that key and a trace id; the
ledger's rows carry the trace id of the attempt that wrote them. A key is charged more than once when the ledger
holds two or more distinct charge transactions written by its attempts. Repeated gateway lines and rows exported
twice (the same transaction id) are one charge; refunds, timeouts that came before the ledger wrote anything, and
retries answered with the first transaction are not charges.
"""

import csv
import json
import os


def _trace_keys(log_dir):
    """{trace id: idempotency key} for every attempt of a charge."""
    out = {}
    folder = os.path.join(log_dir, "gateway")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                if "/v1/charges" in line:
                    g = json.loads(line)
                    if g["route"] == "POST /v1/charges" and g.get("key"):
                        out[g["trace"]] = g["key"]
    return out


def double_charged(log_dir):
    """The idempotency keys of the purchases the ledger charged two or more times."""
    keys = _trace_keys(log_dir)
    charges = {}
    folder = os.path.join(log_dir, "ledger")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), newline="") as f:
            for row in csv.DictReader(f):
                if row["kind"] == "charge" and row["trace"] in keys:
                    charges.setdefault(keys[row["trace"]], set()).add(row["txn"])
    return sorted(k for k, txns in charges.items() if len(txns) > 1)
