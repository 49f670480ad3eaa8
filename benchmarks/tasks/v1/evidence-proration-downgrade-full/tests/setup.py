"""Parent-side setup of evidence-proration-downgrade-full (run by the verdict runner before any task code, and by
the authoring tool for the hidden values): two fresh weeks with other seeds and other fix times, and small
hand-made folders for the cases a detector must get right; the labels never reach the child."""

import importlib.util
import os
import random
import tempfile

WEEKS = {"fresh_week_a": (71, 8_000, 1_704_900_000), "fresh_week_b": (72, 8_000, 1_705_000_000)}  # seed, accounts, fix
REPO_WEEK = (12, 12_000, None)  # what environment/generate.py wrote into the repository


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_evidence", os.path.join(tests, "gen_evidence.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Case:
    """One hand-made folder: events, invoice rows and ledger lines of a few accounts."""

    def __init__(self, gen):
        self.gen, self.events, self.rows, self.ledger = gen, [], [], []

    def event(self, eid, dt, kind, account, plan, previous, effective, start_dt, region="eu-west"):
        g = self.gen
        start = g.START + start_dt
        self.events.append({"id": eid, "ts": g.START + dt, "type": kind, "account": account, "region": region,
                            "billing": "card", "plan": plan, "seats": 2, "period_start": g._iso(start),
                            "period_end": g._iso(start + g.CYCLE), "previous_plan": previous, "effective": effective,
                            "actor": "dashboard", "request_id": "req_" + eid})

    def invoice(self, inv, dt, account, eid, lines, region="eu-west"):
        """lines [(kind, cents, period start dt, period end dt)]."""
        g = self.gen
        for k, (kind, cents, ps, pe) in enumerate(lines, 1):
            self.rows.append((g.START + dt, {"invoice": inv, "account": account, "region": region,
                                             "issued": g.START + dt, "event": eid, "line": k, "kind": kind,
                                             "description": kind, "period_start": g._iso(g.START + ps),
                                             "period_end": g._iso(g.START + pe), "amount_cents": cents,
                                             "currency": "EUR" if region == "eu-west" else "USD"}))

    def ledger_line(self, dt, text, region="eu-west"):
        t = self.gen.START + dt
        self.ledger.append((t, region, "%.3f %s ledger %s" % (t, region, text)))

    def write(self, folder):
        self.gen.write_folder(folder, self.events, self.rows, self.ledger, random.Random(2))
        return folder


def _cases(gen, root):
    day, cyc = 86400, gen.CYCLE
    cases = {}
    # a1: business -> team mid-cycle, its credit note written five hours later (the ledger's queue backed up);
    # a2: renewed, then moved to starter three hours later (a correction: renewal voided, re-issued at starter);
    # a3: scale -> starter mid-cycle, billed a full cycle of starter from the change, no credit
    c = _Case(gen)
    c.event("evt_a1", 7200, "subscription.updated", "a1", "team", "business", "now", -10 * day)
    end = -10 * day + cyc
    c.invoice("in_late", 7230, "a1", "evt_a1", [("proration_charge", 3267, 7200, end), ("tax", 653, 7200, end)])
    c.ledger_line(7231, "invoice_finalized invoice=in_late total=3920 account=a1")
    c.ledger_line(7230 + 5 * 3600, "credit_note id=cn_1 account=a1 invoice=in_late amount=8600 reason=proration")
    c.event("evt_r2", 3600, "subscription.renewed", "a2", "business", "business", "period_end", 3600)
    c.invoice("in_ren", 3630, "a2", "evt_r2", [("plan", 12900, 3600, 3600 + cyc), ("tax", 2580, 3600, 3600 + cyc)])
    c.event("evt_a2", 3600 + 3 * 3600, "subscription.updated", "a2", "starter", "business", "now", 3600)
    c.ledger_line(3600 + 3 * 3600 + 20, "void invoice=in_ren reason=plan_correction account=a2")
    c.invoice("in_corr", 3600 + 3 * 3600 + 30, "a2", "evt_a2", [("plan", 1500, 3600, 3600 + cyc),
                                                               ("tax", 300, 3600, 3600 + cyc)])
    c.event("evt_a3", 9000, "subscription.updated", "a3", "starter", "scale", "now", -12 * day)
    c.invoice("in_full", 9030, "a3", "evt_a3", [("plan", 1500, 9000, 9000 + cyc), ("tax", 300, 9000, 9000 + cyc)])
    cases["late_credit_and_correction"] = c.write(os.path.join(root, "late_credit_and_correction"))
    # b1: team -> starter mid-cycle billed a full cycle, though support gave the account a goodwill credit that day;
    # b2: a downgrade at the period's end, then the renewal at the cheaper plan; b3: an upgrade with its credit line
    c = _Case(gen)
    c.event("evt_b1", 20000, "subscription.updated", "b1", "starter", "team", "now", -5 * day)
    c.invoice("in_gw", 20030, "b1", "evt_b1", [("plan", 1500, 20000, 20000 + cyc), ("tax", 300, 20000, 20000 + cyc)])
    c.ledger_line(21000, "credit_note id=cn_2 account=b1 invoice=- amount=2500 reason=goodwill")
    c.event("evt_b2", 1000, "subscription.updated", "b2", "team", "business", "period_end", -29 * day, "us-east")
    c.event("evt_r2b", day + 500, "subscription.renewed", "b2", "team", "business", "period_end", day + 500,
            "us-east")
    c.invoice("in_pe", day + 530, "b2", "evt_r2b", [("plan", 4900, day + 500, day + 500 + cyc)], "us-east")
    c.event("evt_b3", 30000, "subscription.updated", "b3", "scale", "team", "now", -3 * day)
    c.invoice("in_up", 30030, "b3", "evt_b3", [("proration_charge", 26910, 30000, -3 * day + cyc),
                                               ("proration_credit", -4410, 30000, -3 * day + cyc),
                                               ("tax", 4500, 30000, -3 * day + cyc)])
    cases["goodwill_period_end_upgrade"] = c.write(os.path.join(root, "goodwill_period_end_upgrade"))
    return cases


def fixture(ctx):
    """Folders of the fresh weeks and of the hand-made cases (the child gets paths, never labels)."""
    gen = _gen(ctx["tests"])
    out = {}
    for name, (seed, count, fix) in WEEKS.items():
        folder = os.path.join(ctx["tmp"], name)
        out[name] = {"dir": folder, "ids": sorted(gen.write_logs(folder, seed=seed, count=count, fixed_at=fix))}
    out["cases"] = _cases(gen, os.path.join(ctx["tmp"], "cases"))
    return out


def _week_labels(gen, **kwargs):
    """Writes one week into a temporary folder, removed on return, and returns its true labels."""
    with tempfile.TemporaryDirectory(prefix="week-") as folder:
        return gen.write_logs(folder, **kwargs)


def expected(ctx):
    """The true labels of the fresh weeks and of the repository's week (F1 >= 0.9 needed on each)."""
    gen = _gen(ctx["tests"])
    out = {}
    for name, (seed, count, fix) in list(WEEKS.items()) + [("repository_week", REPO_WEEK)]:
        labels = _week_labels(gen, seed=seed, count=count, fixed_at=fix)
        assert 0.01 <= sum(labels.values()) / len(labels) <= 0.03, (name, sum(labels.values()))
        out["detector_" + name] = {"labels": [labels[k] for k in sorted(labels)], "f1": 0.9}
    return out
