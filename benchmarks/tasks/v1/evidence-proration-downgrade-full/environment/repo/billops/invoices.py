"""Reader for the invoice line exports (logs/invoices/invoices-dDAY.csv, docs/formats.md)."""

from __future__ import annotations

import csv
import dataclasses
import os
from collections.abc import Iterator

KINDS = ("plan", "proration_charge", "proration_credit", "seats", "addon", "tax")


@dataclasses.dataclass
class Line:
    line: int
    kind: str
    description: str
    period_start: str
    period_end: str
    amount_cents: int


@dataclasses.dataclass
class Invoice:
    invoice: str
    account: str
    region: str
    issued: float
    event: str
    currency: str
    lines: list[Line] = dataclasses.field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(x.amount_cents for x in self.lines)

    @property
    def subtotal(self) -> int:
        return sum(x.amount_cents for x in self.lines if x.kind != "tax")

    def amount(self, kind: str) -> int:
        return sum(x.amount_cents for x in self.lines if x.kind == kind)

    def has(self, kind: str) -> bool:
        return any(x.kind == kind for x in self.lines)


def read_rows(log_dir: str) -> Iterator[dict]:
    """Every row of the week's export as exported (a row can repeat: the export is at least once)."""
    folder = os.path.join(log_dir, "invoices")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".csv"):
            with open(os.path.join(folder, name), newline="") as f:
                yield from csv.DictReader(f)


def read_invoices(log_dir: str) -> dict[str, Invoice]:
    """{invoice id: Invoice} with each line once, in line order."""
    out: dict[str, Invoice] = {}
    seen = set()
    for row in read_rows(log_dir):
        key = (row["invoice"], row["line"])
        if key in seen:
            continue
        seen.add(key)
        inv = out.get(row["invoice"])
        if inv is None:
            inv = out[row["invoice"]] = Invoice(row["invoice"], row["account"], row["region"], float(row["issued"]),
                                                row["event"], row["currency"])
        inv.lines.append(Line(int(row["line"]), row["kind"], row["description"], row["period_start"],
                              row["period_end"], int(row["amount_cents"])))
    for inv in out.values():
        inv.lines.sort(key=lambda x: x.line)
    return out
