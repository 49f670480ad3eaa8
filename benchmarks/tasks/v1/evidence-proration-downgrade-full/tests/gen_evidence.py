"""A week of a subscription business's billing exports, from a seed (stdlib only).

    python generate.py REPO     builds REPO from its pinned recurly release and history (sdist_repo.py, a copy of
                                the suite's shared script next to this file: the billing client release the
                                finance team's scripts are built on, then its billops/ tools as a commit),
                                then writes REPO/logs/ (seed 12, 12,000 accounts: 527 files, 33 MB; a week of
                                8,000 accounts is 518-519 files, 22 MB)

Three sources, joined by account, invoice and event ids:
  logs/events/events-dDAY.jsonl       the billing API's event stream, one JSON object per line: id, ts, type
                                      (subscription.renewed, subscription.updated, subscription.seats_changed,
                                      addon.purchased, usage.summarized), account, region, billing (card or
                                      invoice), plan, previous_plan, effective (now or period_end), the current
                                      cycle's period_start and period_end, seats, actor, request id
  logs/invoices/invoices-dDAY.csv     every invoice line issued that day: invoice, account, region, issued, event,
                                      line, kind (plan, proration_charge, proration_credit, seats, addon, tax),
                                      description, period_start, period_end, amount_cents, currency; exported at
                                      least once, so a row can repeat
  logs/ledger/REGION/dDAY-hHH.log     the ledger service's log per region and hour: payments, balance
                                      applications, credit notes (`credit_note id= account= invoice= amount=
                                      reason=proration|goodwill|refund`), voided invoices (`void invoice=`)

Billing rules (the repository's docs/billing.md): a downgrade is immediate or at the period's end; an immediate
one is invoiced at the new plan for the rest of the cycle (proration_charge) and the unused part of the old plan is
credited to the account's balance by a credit note (a credit larger than the invoice's charge never sits on the
invoice; an upgrade's smaller credit does, as a proration_credit line); a plan change within 24 hours of a renewal
is a correction: the renewal is voided and re-issued at the new plan for the full cycle.

The bug (fixed in production at a point of the week, in no repository): in eu-west the proration service treated
every immediate downgrade as a new cycle: it invoiced the new plan for a full month from the change and issued no
credit. An invoice is hurt when it is such a downgrade's invoice. Harmless anomalies: corrections (a full month at
the new plan, no credit, the renewal voided), downgrades credited by credit notes only (no credit line on the
invoice), credit notes issued hours late while the ledger is backlogged, renewals at a cheaper plan after a
downgrade at the period's end, goodwill credit notes, repeated invoice rows, eu-west's VAT lines.

The verifier's setup.py imports this file (a copy in tests/) to draw fresh weeks with other seeds and fix times;
`write_logs` returns the true labels ({invoice id: hurt}); given a dict as `kinds`, it also fills in the harmless
anomaly kinds drawn ({kind: invoices}; goodwill credit notes name no invoice and are not counted) for
benchmarks/evidence_stats.py.
"""

from __future__ import annotations

import csv
import json
import os
import random
import sys
import time

START = 1_704_672_000  # 2024-01-08T00:00:00Z, a Monday
WEEK = 7 * 86400
CYCLE = 30 * 86400
DAY = 86400
PLANS = {"starter": 1500, "team": 4900, "business": 12900, "scale": 29900}  # cents per cycle
ORDER = ("starter", "team", "business", "scale")
SEAT_CENTS = 900
ADDONS = {"extra-storage": 2500, "priority-support": 9900, "audit-log": 4900, "sso": 7900}
REGIONS = (("us-east", 0.5, 0.0, "USD"), ("eu-west", 0.3, 0.20, "EUR"), ("ap-south", 0.2, 0.0, "USD"))
INVOICE_FIELDS = ("invoice", "account", "region", "issued", "event", "line", "kind", "description", "period_start",
                  "period_end", "amount_cents", "currency")
BUGGY_REGION = "eu-west"
CORRECTION_S = DAY
P_DOWN_NOW = 0.12  # accounts downgrading at once, mid-cycle, during the week
P_REACT = 0.7  # accounts renewed in the week that downgrade within a day of the renewal (a correction)
P_DOWN_END = 0.45  # accounts renewing in the week that scheduled a downgrade for the period's end a few days before
P_UP = 0.05
P_SEATS = 0.10
P_ADDON = 0.06
P_GOODWILL = 0.01
REPEAT = 0.1  # invoice rows exported twice
BACKLOG = ((10, 14), (1800, 5 * 3600))  # ledger backlogs: how many in the week, how long


def _hex(rng: random.Random, bits: int = 48) -> str:
    return "%0*x" % (bits // 4, rng.getrandbits(bits))


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(t)))


def _pick_region(rng):
    x, acc = rng.random(), 0.0
    for name, share, _, _ in REGIONS:
        acc += share
        if x < acc:
            return name
    return REGIONS[-1][0]


VAT = {name: vat for name, _, vat, _ in REGIONS}
CURRENCY = {name: cur for name, _, _, cur in REGIONS}


def prorate(cents: int, start: float, end: float, t: float) -> int:
    """The part of a cycle's price for the time left from t to the cycle's end (the billing service's rounding:
    half up to the cent)."""
    return int(cents * max(0.0, end - t) / (end - start) + 0.5)


class Week:
    """What one week writes: events, invoice rows, ledger lines, labels."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.events, self.rows, self.ledger, self.labels = [], [], [], {}
        self.backlog = []
        self.kinds = {}  # harmless anomaly kind -> invoices (the ground truth evidence_stats.py counts)

    def kind(self, name, inv):
        self.kinds.setdefault(name, set()).add(inv)

    def event(self, t, kind, acct, **fields):
        eid = "evt_" + _hex(self.rng, 64)
        x = {"id": eid, "ts": round(t, 3), "type": kind, "account": acct["id"], "region": acct["region"],
             "billing": acct["billing"], "plan": acct["plan"], "seats": acct["seats"],
             "period_start": _iso(acct["start"]), "period_end": _iso(acct["start"] + CYCLE)}
        x.update(fields)
        x["actor"] = self.rng.choice(("api", "dashboard", "dashboard", "support")) if kind != "usage.summarized" \
            else "meter"
        x["request_id"] = "req_" + _hex(self.rng, 64)
        self.events.append(x)
        return eid

    def invoice(self, t, acct, eid, lines, hurt=False):
        """lines [(kind, description, period_start, period_end, cents)]; VAT added in taxed regions."""
        inv = "in_" + _hex(self.rng, 48)
        subtotal = sum(c for *_, c in lines)
        vat = VAT[acct["region"]]
        if vat and subtotal > 0:
            lines = lines + [("tax", "VAT %d%%" % round(vat * 100), lines[0][2], lines[0][3],
                              int(subtotal * vat + 0.5))]
            self.kind("vat_line", inv)
        for k, (kind, desc, ps, pe, cents) in enumerate(lines, 1):
            self.rows.append((t, {"invoice": inv, "account": acct["id"], "region": acct["region"],
                                  "issued": round(t, 3), "event": eid, "line": k, "kind": kind, "description": desc,
                                  "period_start": _iso(ps), "period_end": _iso(pe), "amount_cents": cents,
                                  "currency": CURRENCY[acct["region"]]}))
        self.labels[inv] = hurt
        self.ledger_line(t + self.rng.uniform(1, 30), acct, "invoice_finalized invoice=%s total=%d" % (
            inv, sum(c for *_, c in lines)))
        if acct["billing"] == "card":
            self.ledger_line(t + self.rng.uniform(30, 120), acct, "payment %s invoice=%s method=card" % (
                "succeeded" if self.rng.random() < 0.97 else "declined attempt=1", inv))
        return inv

    def ledger_line(self, t, acct, text):
        self.ledger.append((t, acct["region"], "%.3f %s ledger %s account=%s" % (t, acct["region"], text, acct["id"])
                            if "account=" not in text else "%.3f %s ledger %s" % (t, acct["region"], text)))

    def credit_note(self, t, acct, inv, cents, reason):
        lag = self.rng.uniform(2, 90)
        for s, e in self.backlog:
            if s <= t < e:
                lag += e - t + self.rng.uniform(0, 600)  # held until the backlog clears
                if inv:
                    self.kind("credit_note_hours_late", inv)
        self.ledger_line(t + lag, acct, "credit_note id=cn_%s account=%s invoice=%s amount=%d reason=%s" % (
            _hex(self.rng, 40), acct["id"], inv or "-", cents, reason))


def write_logs(folder: str, seed: int = 12, count: int = 12_000, fixed_at: float | None = None,
               kinds: dict | None = None) -> dict:
    """Write a week under folder/{events,invoices,ledger}; {invoice id: a full-month downgrade invoice of the bug}.
    fixed_at (UTC seconds): when the proration fix went out in eu-west; by default on the third or fourth day.
    kinds: filled with the harmless anomaly kinds drawn (module docstring)."""
    rng = random.Random(seed)
    if fixed_at is None:
        fixed_at = START + WEEK * rng.uniform(0.35, 0.6)
    w = Week(rng)
    for _ in range(rng.randint(*BACKLOG[0])):
        s = START + rng.uniform(0, WEEK)
        w.backlog.append((s, s + rng.uniform(*BACKLOG[1])))
    accounts = []
    for _ in range(count):
        plan = rng.choices(ORDER, (0.35, 0.35, 0.22, 0.08))[0]
        accounts.append({"id": "acct_" + _hex(rng, 40), "region": _pick_region(rng), "plan": plan,
                         "billing": "invoice" if plan in ("business", "scale") and rng.random() < 0.6 else "card",
                         "seats": rng.randint(1, 40), "start": START - rng.uniform(0, CYCLE)})
    for acct in accounts:
        _account_week(w, acct, fixed_at)
    repeated = set()
    write_folder(folder, w.events, w.rows, w.ledger, rng, repeated)
    if kinds is not None:
        kinds.update({name: len(invs) for name, invs in w.kinds.items()}, repeated_invoice_row=len(repeated))
    return w.labels


def _cheaper(rng, plan):
    k = ORDER.index(plan)
    return ORDER[rng.randrange(k)] if k > 0 else None


def _account_week(w: Week, acct: dict, fixed_at: float):
    """One account's week: a renewal if its cycle turns over, plan and seat changes, add-ons, daily usage."""
    rng = w.rng
    for day in range(7):
        t = START + day * DAY + rng.uniform(0, DAY)
        w.event(t, "usage.summarized", acct, api_calls=rng.randint(0, 200_000),
                storage_gb=round(rng.uniform(0, 500), 1))
    renew_at = acct["start"] + CYCLE
    plans = []  # (t, what)
    if renew_at < START + WEEK:
        if rng.random() < P_DOWN_END and acct["plan"] != "starter":
            plans.append((max(START, renew_at - rng.uniform(0, 5 * DAY)), "down_end"))
        plans.append((renew_at, "renew"))
        if rng.random() < P_REACT and acct["plan"] != "starter":
            plans.append((renew_at + rng.uniform(600, CORRECTION_S - 600), "react"))
    if rng.random() < P_DOWN_NOW:
        plans.append((START + rng.uniform(0, WEEK), "down_now"))
    if rng.random() < P_UP:
        plans.append((START + rng.uniform(0, WEEK), "up"))
    if rng.random() < P_SEATS:
        plans.append((START + rng.uniform(0, WEEK), "seats"))
    if rng.random() < P_ADDON:
        plans.append((START + rng.uniform(0, WEEK), "addon"))
    scheduled, last_renewal = None, None
    for t, what in sorted(plans):
        if t >= START + WEEK:
            continue
        if what == "renew":
            old = acct["plan"]
            cheaper = scheduled
            if scheduled:
                acct["plan"], scheduled = scheduled, None
            acct["start"] = t
            eid = w.event(t, "subscription.renewed", acct, previous_plan=old, effective="period_end")
            last_renewal = w.invoice(t + rng.uniform(1, 60), acct, eid,
                                     [("plan", "%s plan" % acct["plan"], t, t + CYCLE, PLANS[acct["plan"]])])
            if cheaper:
                w.kind("renewal_cheaper_after_period_end_downgrade", last_renewal)
        elif what == "down_end":
            new = _cheaper(rng, acct["plan"])
            if new:
                scheduled = new
                w.event(t, "subscription.updated", acct, plan=new, previous_plan=acct["plan"], effective="period_end")
        elif what in ("down_now", "react"):
            new = _cheaper(rng, acct["plan"])
            if new is None or (what == "react" and last_renewal is None):
                continue
            old, acct["plan"] = acct["plan"], new
            eid = w.event(t, "subscription.updated", acct, previous_plan=old, effective="now")
            start, end = acct["start"], acct["start"] + CYCLE
            issued = t + rng.uniform(1, 60)
            if t - start < CORRECTION_S:  # a correction: void the renewal and re-issue it at the new plan
                voided = last_renewal or "in_" + _hex(rng, 48)  # (a renewal of last week when not in this one)
                w.ledger_line(issued - 0.5, acct, "void invoice=%s reason=plan_correction" % voided)
                w.kind("correction_full_month", w.invoice(issued, acct, eid, [("plan", "%s plan" % new, start, end,
                                                                             PLANS[new])]))
            elif acct["region"] == BUGGY_REGION and t < fixed_at:  # the bug: a new full cycle, no credit
                acct["start"] = t
                w.invoice(issued, acct, eid, [("plan", "%s plan" % new, t, t + CYCLE, PLANS[new])], hurt=True)
            else:
                inv = w.invoice(issued, acct, eid, [("proration_charge", "%s plan (rest of cycle)" % new, t, end,
                                                     prorate(PLANS[new], start, end, t))])
                w.credit_note(issued, acct, inv, prorate(PLANS[old], start, end, t), "proration")
                w.kind("downgrade_credited_by_note_only", inv)
        elif what == "up":
            k = ORDER.index(acct["plan"])
            if k == len(ORDER) - 1:
                continue
            old, acct["plan"] = acct["plan"], ORDER[rng.randrange(k + 1, len(ORDER))]
            eid = w.event(t, "subscription.updated", acct, previous_plan=old, effective="now")
            start, end = acct["start"], acct["start"] + CYCLE
            w.invoice(t + rng.uniform(1, 60), acct, eid,
                      [("proration_charge", "%s plan (rest of cycle)" % acct["plan"], t, end,
                        prorate(PLANS[acct["plan"]], start, end, t)),
                       ("proration_credit", "unused %s plan" % old, t, end, -prorate(PLANS[old], start, end, t))])
        elif what == "seats":
            old = acct["seats"]
            acct["seats"] = max(1, old + rng.choice((-3, -1, 1, 2, 5, 10)))
            eid = w.event(t, "subscription.seats_changed", acct, previous_seats=old)
            if acct["seats"] > old:
                start, end = acct["start"], acct["start"] + CYCLE
                w.invoice(t + rng.uniform(1, 60), acct, eid,
                          [("seats", "%d seats (rest of cycle)" % (acct["seats"] - old), t, end,
                            prorate(SEAT_CENTS * (acct["seats"] - old), start, end, t))])
        else:
            name = rng.choice(sorted(ADDONS))
            eid = w.event(t, "addon.purchased", acct, addon=name)
            w.invoice(t + rng.uniform(1, 60), acct, eid, [("addon", name, t, t, ADDONS[name])])
    if rng.random() < P_GOODWILL:
        w.credit_note(START + rng.uniform(0, WEEK), acct, None, rng.choice((500, 1000, 2500)), "goodwill")


def write_folder(folder: str, events: list, rows: list, ledger: list, rng: random.Random | None = None,
                 repeated: set | None = None):
    """Write events (dicts), invoice rows [(t, row)] and ledger lines [(t, region, text)] in the production layout.
    repeated: the invoices with a row exported twice are added to it."""
    rng = rng or random.Random(0)
    for sub in ("events", "invoices", "ledger"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    by_day = {}
    for x in events:
        by_day.setdefault(int((x["ts"] - START) // DAY), []).append(x)
    for day in range(7):
        group = sorted(by_day.get(day, []), key=lambda x: x["ts"])
        with open(os.path.join(folder, "events", "events-d%d.jsonl" % day), "w") as f:
            f.writelines(json.dumps(x, separators=(",", ":")) + "\n" for x in group)
    by_day = {}
    for t, row in rows:
        by_day.setdefault(int((t - START) // DAY), []).append((t, row))
    for day in sorted(by_day):
        group = sorted(by_day[day], key=lambda r: (r[0], r[1]["line"]))
        out = []
        for _, row in group:
            out.append(row)
            if rng.random() < REPEAT:
                out.append(row)
                if repeated is not None:
                    repeated.add(row["invoice"])
        with open(os.path.join(folder, "invoices", "invoices-d%d.csv" % day), "w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=INVOICE_FIELDS)
            wr.writeheader()
            wr.writerows(out)
    by_hour = {}
    for t, region, text in ledger:
        by_hour.setdefault((region, int((t - START) // 3600)), []).append((t, text))
    for name, _, _, _ in REGIONS:
        os.makedirs(os.path.join(folder, "ledger", name), exist_ok=True)
        last = max([WEEK // 3600 - 1] + [h for r, h in by_hour if r == name])  # late lines go past the week
        for hour in range(last + 1):
            lines = sorted(by_hour.get((name, hour), []))
            with open(os.path.join(folder, "ledger", name, "d%d-h%02d.log" % divmod(hour, 24)), "w") as f:
                f.writelines(text + "\n" for _, text in lines)


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
