"""Contact exports that finished without a contact that existed throughout.

An export (`export` on the API's GET /v1/contacts/export lines) is one client run paging through a tenant's
contacts. It finished when a page answered 200 with no next cursor. Each page was computed when its request came
in (`ts` is when the answer went out, `ms` after). A contact existed throughout the export when the week's
snapshot or an insert holds it before the first page was computed and no delete removed it before the last one
was; such a contact must be in some page. Contacts inserted or deleted during the export, abandoned exports,
pages answered 503 and retried, and repeated log lines are not misses.
"""

import csv
import json
import os

INF = float("inf")


def _contacts(log_dir):
    """{tenant: {contact id: [created, deleted]}} (the snapshot's contacts created at -inf)."""
    out = {}
    folder = os.path.join(log_dir, "snapshot")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            next(f)
            out[name[:-len(".csv")]] = {int(line): [-INF, INF] for line in f if line.strip()}
    folder = os.path.join(log_dir, "cdc")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), newline="") as f:
            for row in csv.DictReader(f):
                life = out.setdefault(row["tenant"], {}).setdefault(int(row["id"]), [-INF, INF])
                if row["op"] == "insert":
                    life[0] = float(row["ts"])
                elif row["op"] == "delete":
                    life[1] = float(row["ts"])
    return out


def _exports(log_dir):
    """{export: {"tenant", "first", "last", "done", "ids"}} over the pages answered 200."""
    out = {}
    folder = os.path.join(log_dir, "api")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                x = json.loads(line)
                if x["status"] != 200:
                    continue
                at = x["ts"] - x["ms"] / 1000
                e = out.setdefault(x["export"], {"tenant": x["tenant"], "first": at, "last": at, "done": False,
                                                 "ids": set()})
                e["first"], e["last"] = min(e["first"], at), max(e["last"], at)
                e["done"] = e["done"] or x["next"] is None
                e["ids"].update(x["ids"])
    return out


def skipped_exports(log_dir):
    """The ids of the finished exports that never returned a contact existing from their first page to their last."""
    contacts = _contacts(log_dir)
    hurt = []
    for export, e in _exports(log_dir).items():
        if not e["done"]:
            continue
        lives = contacts.get(e["tenant"], {})
        if any(c <= e["first"] and d > e["last"] and cid not in e["ids"] for cid, (c, d) in lives.items()):
            hurt.append(export)
    return sorted(hurt)
