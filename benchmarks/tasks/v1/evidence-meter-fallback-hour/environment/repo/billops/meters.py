"""Meter reports (docs/formats.md)."""

import csv
import os


def read_report(path):
    """The rows of one meter report as dicts with a float counter."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row["kwh_counter"] = float(row["kwh_counter"])
    return rows


def iter_reports(log_dir):
    """(meter id, rows) for every report under log_dir/meters."""
    folder = os.path.join(log_dir, "meters")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".csv"):
            yield name[:-len(".csv")], read_report(os.path.join(folder, name))
