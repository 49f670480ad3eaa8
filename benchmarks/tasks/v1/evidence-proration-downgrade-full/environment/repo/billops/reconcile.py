"""Ledger reconciliation: every issued invoice is finalized in the ledger with the same total, and every card
invoice has a payment attempt. Finance runs it after each export to catch lost or altered ledger entries."""

from __future__ import annotations

import dataclasses

from billops.events import accounts
from billops.invoices import read_invoices
from billops.ledger import read_ledger


@dataclasses.dataclass
class Mismatch:
    invoice: str
    problem: str  # "not finalized", "total differs", "no payment", "unknown invoice"
    detail: str = ""


def reconcile(log_dir: str) -> list[Mismatch]:
    """Mismatches between the invoice export and the ledger, sorted by invoice."""
    invoices = read_invoices(log_dir)
    billing = {a: s["billing"] for a, s in accounts(log_dir).items()}
    finalized, paid = {}, set()
    for e in read_ledger(log_dir):
        if e.what == "invoice_finalized":
            finalized[e.get("invoice")] = int(e.get("total", 0))
        elif e.what == "payment":
            paid.add(e.get("invoice"))
    out = []
    for inv_id, inv in invoices.items():
        if inv_id not in finalized:
            out.append(Mismatch(inv_id, "not finalized"))
        elif finalized[inv_id] != inv.total:
            out.append(Mismatch(inv_id, "total differs", "ledger %d, export %d" % (finalized[inv_id], inv.total)))
        if billing.get(inv.account) == "card" and inv_id not in paid:
            out.append(Mismatch(inv_id, "no payment"))
    out.extend(Mismatch(i, "unknown invoice") for i in finalized if i not in invoices)
    return sorted(out, key=lambda m: (m.invoice, m.problem))


def summary(mismatches: list[Mismatch]) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in mismatches:
        out[m.problem] = out.get(m.problem, 0) + 1
    return out
