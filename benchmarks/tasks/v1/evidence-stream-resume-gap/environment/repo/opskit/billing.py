"""Billing exports (docs/log-formats.md)."""

import csv
import os


def iter_rows(log_dir):
    """Every billing row under log_dir/billing with integer token counts."""
    folder = os.path.join(log_dir, "billing")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                row["tokens_generated"] = int(row["tokens_generated"])
                row["tokens_billed"] = int(row["tokens_billed"])
                yield row
