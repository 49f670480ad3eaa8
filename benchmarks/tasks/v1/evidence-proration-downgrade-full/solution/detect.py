"""Invoices of immediate downgrades billed as a new full cycle with no credit for the old plan.

An immediate downgrade (a `subscription.updated` event, `effective` now, to a plan cheaper than `previous_plan`) is
invoiced at the new plan for the rest of the cycle, and the unused part of the old plan is credited to the
account's balance by a `credit_note ... invoice=INV ... reason=proration` line in the ledger, sometimes hours later
(billops/docs/billing.md). A plan change within 24 hours of the cycle's start is a correction: the renewal is voided and
re-issued at the new plan for the full cycle, with no credit. A downgrade's invoice outside that window with no
proration credit note for it was billed as a new full cycle. Repeated invoice rows are one row.
"""

import csv
import json
import os
import re
import time

PLAN_CENTS = {"starter": 1500, "team": 4900, "business": 12900, "scale": 29900}  # billops/plans.py
CORRECTION_S = 86400
CREDIT = re.compile(r"\bcredit_note\b.*\binvoice=(\S+).*\breason=proration\b")


def _epoch(iso):
    return time.mktime(time.strptime(iso, "%Y-%m-%dT%H:%M:%SZ")) - time.mktime(time.gmtime(0))


def _downgrades(log_dir):
    """{event id: the event} for immediate downgrades."""
    out = {}
    folder = os.path.join(log_dir, "events")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                if not line.strip():
                    continue
                e = json.loads(line)
                if (e["type"] == "subscription.updated" and e.get("effective") == "now"
                        and PLAN_CENTS[e["plan"]] < PLAN_CENTS[e["previous_plan"]]):
                    out[e["id"]] = e
    return out


def _credited(log_dir):
    """Invoice ids a proration credit note was issued for."""
    out = set()
    for root, _, files in os.walk(os.path.join(log_dir, "ledger")):
        for name in files:
            with open(os.path.join(root, name)) as f:
                for line in f:
                    m = CREDIT.search(line)
                    if m:
                        out.add(m.group(1))
    return out


def overcharged_downgrades(log_dir):
    """The ids of the invoices of immediate downgrades billed as a new cycle without the old plan's credit."""
    downgrades, credited = _downgrades(log_dir), _credited(log_dir)
    hurt = set()
    folder = os.path.join(log_dir, "invoices")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), newline="") as f:
            for row in csv.DictReader(f):
                e = downgrades.get(row["event"])
                if e is None or row["invoice"] in credited:
                    continue
                if e["ts"] - _epoch(e["period_start"]) < CORRECTION_S:
                    continue  # a correction of the renewal: re-issued for the full cycle, no credit owed
                hurt.add(row["invoice"])
    return sorted(hurt)
