"""The contacts table: the week's snapshot and its change stream (docs/formats.md)."""

import csv
import os


def snapshot(log_dir):
    """{tenant: [contact ids]} at the start of the week."""
    out = {}
    folder = os.path.join(log_dir, "snapshot")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            rows = csv.DictReader(f)
            out[name[:-len(".csv")]] = [int(r["id"]) for r in rows]
    return out


def iter_changes(log_dir):
    """Every change row, in file order, ts as float and id as int."""
    folder = os.path.join(log_dir, "cdc")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                row["ts"], row["id"] = float(row["ts"]), int(row["id"])
                yield row


def counts_at_end(log_dir):
    """{tenant: contacts at the end of the week} (snapshot plus inserts minus deletes)."""
    out = {t: len(ids) for t, ids in snapshot(log_dir).items()}
    for row in iter_changes(log_dir):
        out[row["tenant"]] = out.get(row["tenant"], 0) + {"insert": 1, "delete": -1}.get(row["op"], 0)
    return out
