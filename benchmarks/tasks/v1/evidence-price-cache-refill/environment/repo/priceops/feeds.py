"""Readers of the three exports (docs/formats.md)."""

import csv
import json
import os


def iter_orders(log_dir):
    """Every order line under log_dir/orders (repeated lines included)."""
    folder = os.path.join(log_dir, "orders")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)


def orders(log_dir):
    """{order id: order}, each order once."""
    return {o["order"]: o for o in iter_orders(log_dir)}


def iter_cache(log_dir):
    """Every cache event as (ts, node, op, fields)."""
    folder = os.path.join(log_dir, "cache")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for line in f:
                p = line.split()
                if p:
                    yield float(p[0]), p[1], p[2], p[3:]


def iter_commits(log_dir):
    """Every price change in lsn order, numbers converted."""
    rows = []
    folder = os.path.join(log_dir, "db")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), newline="", encoding="utf-8") as f:
            for r in csv.DictReader(f):
                rows.append({"lsn": int(r["lsn"]), "committed": float(r["committed"]), "sku": r["sku"],
                             "unit_cents": int(r["unit_cents"]), "effective": float(r["effective"])})
    return sorted(rows, key=lambda r: r["lsn"])
