"""The weekly billing report: invoices and totals per region, VAT, plan movements, credit notes, dunning.

    python -m billops.report logs/
"""

from __future__ import annotations

import sys

from billops import dunning, mrr, tax
from billops.invoices import read_invoices
from billops.ledger import credit_notes, voided


def weekly(log_dir: str) -> dict:
    invoices = read_invoices(log_dir)
    notes = credit_notes(log_dir)
    by_reason: dict[str, int] = {}
    for n in notes:
        by_reason[n.get("reason", "?")] = by_reason.get(n.get("reason", "?"), 0) + int(n.get("amount", 0))
    return {"invoices": len(invoices), "vat": tax.summary(invoices), "movements": mrr.movements(log_dir),
            "credit_notes": by_reason, "voided": len(voided(log_dir)),
            "unpaid": len(dunning.unpaid_card_invoices(log_dir))}


def render(report: dict) -> str:
    lines = ["invoices: %d (voided %d, unpaid card %d)" % (report["invoices"], report["voided"], report["unpaid"])]
    for region, s in sorted(report["vat"].items()):
        lines.append("  %-9s %6d invoices  net %12.2f  vat %10.2f  off by %d cents" % (
            region, s["invoices"], s["net"] / 100, s["vat"] / 100, s["off_by"]))
    lines.append("movements: " + ", ".join("%s %d" % kv for kv in sorted(report["movements"].items())))
    notes = sorted(report["credit_notes"].items())
    lines.append("credit notes: " + ", ".join("%s %.2f" % (k, v / 100) for k, v in notes))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m billops.report LOG_DIR", file=sys.stderr)
        return 2
    print(render(weekly(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
