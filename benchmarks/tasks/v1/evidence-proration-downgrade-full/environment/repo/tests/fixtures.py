"""A tiny week in the exports' layout, written into a temporary folder for the tests."""

import csv
import json
import os
import tempfile

START = 1_704_672_000
FIELDS = ("invoice", "account", "region", "issued", "event", "line", "kind", "description", "period_start",
          "period_end", "amount_cents", "currency")


def _event(eid, ts, kind, account, region, plan, **extra):
    e = {"id": eid, "ts": ts, "type": kind, "account": account, "region": region, "billing": "card", "plan": plan,
         "seats": 3, "period_start": "2024-01-01T00:00:00Z", "period_end": "2024-01-31T00:00:00Z"}
    e.update(extra)
    return e


def week() -> str:
    """Two accounts: a1 (eu-west) upgrades team -> business; a2 (us-east) renews and buys an add-on."""
    root = tempfile.mkdtemp(prefix="billops-test-")
    for sub in ("events", "invoices", "ledger/eu-west", "ledger/us-east"):
        os.makedirs(os.path.join(root, sub))
    events = [_event("evt_1", START + 100, "subscription.updated", "a1", "eu-west", "business", previous_plan="team",
                     effective="now"),
              _event("evt_2", START + 200, "subscription.renewed", "a2", "us-east", "team", previous_plan="team",
                     effective="period_end", period_start="2024-01-08T00:03:20Z", period_end="2024-02-07T00:03:20Z"),
              _event("evt_3", START + 300, "addon.purchased", "a2", "us-east", "team", addon="sso"),
              _event("evt_4", START + 400, "usage.summarized", "a2", "us-east", "team", api_calls=10, storage_gb=1.5)]
    with open(os.path.join(root, "events", "events-d0.jsonl"), "w") as f:
        for e in events + events[:1]:  # the stream is at least once
            f.write(json.dumps(e) + "\n")
    rows = [("in_1", "a1", "eu-west", "evt_1", 1, "proration_charge", 9000), ("in_1", "a1", "eu-west", "evt_1", 2,
                                                                               "proration_credit", -3400),
            ("in_1", "a1", "eu-west", "evt_1", 3, "tax", 1120), ("in_2", "a2", "us-east", "evt_2", 1, "plan", 4900),
            ("in_3", "a2", "us-east", "evt_3", 1, "addon", 7900)]
    with open(os.path.join(root, "invoices", "invoices-d0.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for inv, acct, region, eid, line, kind, cents in rows + rows[:1]:
            w.writerow({"invoice": inv, "account": acct, "region": region, "issued": START + 150, "event": eid,
                        "line": line, "kind": kind, "description": kind, "period_start": "2024-01-08T00:00:00Z",
                        "period_end": "2024-01-31T00:00:00Z", "amount_cents": cents,
                        "currency": "EUR" if region == "eu-west" else "USD"})
    with open(os.path.join(root, "ledger", "eu-west", "d0-h00.log"), "w") as f:
        f.write("%.3f eu-west ledger invoice_finalized invoice=in_1 total=6720 account=a1\n" % (START + 160))
        f.write("%.3f eu-west ledger payment succeeded invoice=in_1 method=card account=a1\n" % (START + 200))
        f.write("%.3f eu-west ledger credit_note id=cn_1 account=a1 invoice=- amount=500 reason=goodwill\n" % (
            START + 900))
    with open(os.path.join(root, "ledger", "us-east", "d0-h00.log"), "w") as f:
        f.write("%.3f us-east ledger payment declined attempt=1 invoice=in_2 method=card account=a2\n" % (START + 260))
        f.write("%.3f us-east ledger payment succeeded invoice=in_3 method=card account=a2\n" % (START + 360))
        f.write("%.3f us-east ledger void invoice=in_0 reason=plan_correction account=a2\n" % (START + 370))
        f.write("not a ledger line\n")
    return root
