"""Parser for the ledger service's logs (logs/ledger/REGION/dDAY-hHH.log, docs/formats.md).

A line is `TS REGION ledger WHAT key=value ...`; WHAT is invoice_finalized, payment, credit_note or void.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator


@dataclasses.dataclass(frozen=True)
class Entry:
    ts: float
    region: str
    what: str
    words: tuple[str, ...]  # the bare words after WHAT (a payment's outcome)
    fields: dict

    def get(self, key: str, default=None):
        return self.fields.get(key, default)


def parse(line: str) -> Entry | None:
    """One log line, or None for a line that is not a ledger entry."""
    parts = line.split()
    if len(parts) < 4 or parts[2] != "ledger":
        return None
    fields, words = {}, []
    for p in parts[4:]:
        key, eq, value = p.partition("=")
        if eq:
            fields[key] = value
        else:
            words.append(p)
    try:
        ts = float(parts[0])
    except ValueError:
        return None
    return Entry(ts, parts[1], parts[3], tuple(words), fields)


def read_ledger(log_dir: str, regions: tuple[str, ...] | None = None) -> Iterator[Entry]:
    """Every entry of every region's hourly files (files in name order; late entries sit in later hours)."""
    root = os.path.join(log_dir, "ledger")
    for region in sorted(os.listdir(root)):
        if regions is not None and region not in regions:
            continue
        for name in sorted(os.listdir(os.path.join(root, region))):
            with open(os.path.join(root, region, name)) as f:
                for line in f:
                    entry = parse(line)
                    if entry is not None:
                        yield entry


def credit_notes(log_dir: str, reason: str | None = None) -> list[Entry]:
    return [e for e in read_ledger(log_dir)
            if e.what == "credit_note" and (reason is None or e.get("reason") == reason)]


def voided(log_dir: str) -> set[str]:
    """Invoice ids voided during the week."""
    return {e.get("invoice") for e in read_ledger(log_dir) if e.what == "void"}


def payments(log_dir: str) -> dict[str, list[Entry]]:
    """{invoice: its payment entries in time order}."""
    out: dict[str, list[Entry]] = {}
    for e in read_ledger(log_dir):
        if e.what == "payment":
            out.setdefault(e.get("invoice"), []).append(e)
    for v in out.values():
        v.sort(key=lambda e: e.ts)
    return out
