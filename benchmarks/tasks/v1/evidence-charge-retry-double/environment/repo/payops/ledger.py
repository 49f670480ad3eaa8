"""Ledger shard exports (docs/log-formats.md)."""

import csv
import os


def iter_rows(log_dir):
    """Every exported row under log_dir/ledger, amounts as int (rows exported twice included)."""
    folder = os.path.join(log_dir, "ledger")
    for name in sorted(os.listdir(folder)):
        shard = name.split("-")[1]
        with open(os.path.join(folder, name), newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                row["amount_cents"] = int(row["amount_cents"])
                row["created"] = float(row["created"])
                row["shard"] = shard
                yield row


def transactions(log_dir):
    """{txn id: row}, each transaction once."""
    return {row["txn"]: row for row in iter_rows(log_dir)}
