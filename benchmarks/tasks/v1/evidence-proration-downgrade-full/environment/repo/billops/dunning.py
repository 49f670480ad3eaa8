"""Dunning: card invoices whose payment was declined and never succeeded during the week."""

from __future__ import annotations

from billops.invoices import read_invoices
from billops.ledger import payments


def unpaid_card_invoices(log_dir: str) -> list[str]:
    """Invoice ids with a declined card payment and no later success, sorted."""
    out = []
    for invoice, entries in payments(log_dir).items():
        outcomes = [e.words[0] if e.words else "" for e in entries]
        if "declined" in outcomes and "succeeded" not in outcomes[outcomes.index("declined"):]:
            out.append(invoice)
    return sorted(out)


def dunning_list(log_dir: str) -> list[dict]:
    """One row per unpaid invoice: invoice, account, region, total (for the collections team)."""
    invoices = read_invoices(log_dir)
    rows = []
    for inv_id in unpaid_card_invoices(log_dir):
        inv = invoices.get(inv_id)
        if inv is not None:
            rows.append({"invoice": inv_id, "account": inv.account, "region": inv.region, "total": inv.total})
    return rows
