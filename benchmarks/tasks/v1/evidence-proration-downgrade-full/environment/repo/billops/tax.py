"""VAT on invoices: rates and currencies per region, and the rounding the billing service applies.

Since release 2024.01.2 (CHANGELOG.md) VAT is computed once on the invoice's subtotal and rounded half up to the
cent; before it each line was taxed and rounded on its own, which could differ by a cent per line.
"""

from __future__ import annotations

from billops.invoices import Invoice

REGIONS = {"us-east": {"vat": 0.0, "currency": "USD"}, "eu-west": {"vat": 0.20, "currency": "EUR"},
           "ap-south": {"vat": 0.0, "currency": "USD"}}


def rate(region: str) -> float:
    return REGIONS[region]["vat"]


def vat_on(subtotal: int, region: str) -> int:
    """The VAT line of an invoice with this subtotal (no VAT on a zero or negative subtotal)."""
    r = rate(region)
    if not r or subtotal <= 0:
        return 0
    return int(subtotal * r + 0.5)


def vat_per_line(amounts: list[int], region: str) -> int:
    """The old rule (before 2024.01.2): each line taxed and rounded on its own."""
    return sum(vat_on(a, region) for a in amounts if a > 0)


def check_invoice(inv: Invoice) -> int:
    """The invoice's VAT minus what the current rule gives (0 when it is right)."""
    return inv.amount("tax") - vat_on(inv.subtotal, inv.region)


def summary(invoices: dict[str, Invoice]) -> dict[str, dict[str, int]]:
    """{region: {"invoices", "net", "vat", "off_by"}}: VAT collected per region and the cents it is off by."""
    out: dict[str, dict[str, int]] = {}
    for inv in invoices.values():
        s = out.setdefault(inv.region, {"invoices": 0, "net": 0, "vat": 0, "off_by": 0})
        s["invoices"] += 1
        s["net"] += inv.subtotal
        s["vat"] += inv.amount("tax")
        s["off_by"] += abs(check_invoice(inv))
    return out
