"""Receivables: net-30 invoices (accounts billed by invoice) and what is still open on them.

Card invoices are paid at once (their payments are in the ledger); invoice-billed accounts pay by transfer within
30 days, and the ledger's credit notes reduce what they owe.
"""

from __future__ import annotations

from billops.events import accounts
from billops.invoices import read_invoices
from billops.ledger import credit_notes

NET_DAYS = 30


def open_items(log_dir: str) -> list[dict]:
    """One row per invoice of an invoice-billed account: invoice, account, issued, due, total."""
    billing = {a: s["billing"] for a, s in accounts(log_dir).items()}
    rows = []
    for inv in read_invoices(log_dir).values():
        if billing.get(inv.account) == "invoice":
            rows.append({"invoice": inv.invoice, "account": inv.account, "issued": inv.issued,
                         "due": inv.issued + NET_DAYS * 86400, "total": inv.total})
    return sorted(rows, key=lambda r: (r["due"], r["invoice"]))


def balances(log_dir: str) -> dict[str, int]:
    """{account: cents owed} for invoice-billed accounts: their invoices' totals less their credit notes."""
    owed: dict[str, int] = {}
    for row in open_items(log_dir):
        owed[row["account"]] = owed.get(row["account"], 0) + row["total"]
    for note in credit_notes(log_dir):
        account = note.get("account")
        if account in owed:
            owed[account] -= int(note.get("amount", 0))
    return owed
