"""A week of a contacts API's bulk-export logs, its change stream and table snapshots, from a seed (stdlib only).

    python generate.py REPO     builds REPO from its pinned requests release and history (sdist_repo.py, a copy of
                                the suite's shared script next to this file: the release the contacts sync
                                client is built on, then the integrations team's syncops/ tools as a commit),
                                then writes REPO/logs/ (seed 5, 1,500 exports: ≈ 710 files, ≈ 35 MB)

Three sources, joined by tenant, export id and time:
  logs/api/api-HOST-dDAY-hHOUR.jsonl  one line per page request of GET /v1/contacts/export: ts, host, tenant,
                                      export (the client's export run), cursor (in), limit, status, next (the
                                      cursor of the following page, null on the last page), ids (the contact ids
                                      of the page, on 200) and ms; shipped at least once, so a line can repeat
  logs/cdc/cdc-dDAY-hHOUR.csv         the change stream of the contacts table: ts, tenant, op (insert, update,
                                      delete), id
  logs/snapshot/TENANT.csv            every tenant's contact ids at the start of the week

The server's bug (fixed in production at a point of the week, in no repository): the export cursor held an offset
into the tenant's contacts ordered by id. A contact deleted behind the cursor between two pages shifted the rest
one place down, so the next page started one contact too far and the contact at the boundary was never exported.
After the fix the cursor holds the last id returned. An export is hurt when it finished (its last page said there
was no next page) without a contact that existed from its first page to its last. Harmless anomalies: exports the
client abandoned half-way, contacts deleted ahead of the cursor, contacts inserted during an export, pages
retried after a 503, repeated log lines, contacts deleted behind the cursor after the fix, updates.

The verifier's setup.py imports this file (a copy in tests/) to draw fresh weeks with other seeds and fix times;
`write_logs` returns the true labels ({export id: hurt}); given a dict as `kinds`, it also fills in the harmless
anomaly kinds drawn ({kind: exports}, or (lines, all lines, unit) for the repeated log lines) for
benchmarks/evidence_stats.py.
"""

from __future__ import annotations

import base64
import bisect
import csv
import heapq
import json
import os
import random
import sys

START = 1_700_438_400  # 2023-11-20T00:00:00Z
WEEK = 7 * 86400
HOSTS = ("api-1", "api-2", "api-3")
LIMITS = (50, 100, 100, 200)
P_ABANDON = 0.008  # per page: the client gives up the export
P_503 = 0.008  # per page request: the API answers 503 and the client retries the same cursor
P_DUP = 0.008  # per log line: shipped twice
CDC_FIELDS = ("ts", "tenant", "op", "id")


def _hex(rng: random.Random, bits: int = 48) -> str:
    return "%0*x" % (bits // 4, rng.getrandbits(bits))


def cursor(kind: str, value: int) -> str:
    """The opaque cursor of the API: base64 of "offset:N" (before the fix) or "after:ID" (after)."""
    return base64.urlsafe_b64encode(("%s:%d" % (kind, value)).encode()).decode()


def api_line(ts, host, tenant, export, cur, limit, status, nxt, ids, ms):
    """One access-log line (the field order of production)."""
    return {"ts": round(ts, 3), "host": host, "route": "GET /v1/contacts/export", "tenant": tenant,
            "export": export, "cursor": cur, "limit": limit, "status": status, "next": nxt, "ids": ids, "ms": ms}


class _Table:
    """One tenant's contact ids, kept sorted (inserts take a new, larger id)."""

    def __init__(self, ids):
        self.ids = sorted(ids)
        self.next_id = self.ids[-1] + 1

    def page(self, cur, limit, fixed):
        """(ids, next cursor or None) for a cursor (None: the first page)."""
        if fixed:
            start = 0 if cur is None else bisect.bisect_right(self.ids, cur)
        else:
            start = 0 if cur is None else cur
        ids = self.ids[start:start + limit]
        if start + limit >= len(self.ids):
            return ids, None
        return ids, (ids[-1] if fixed else start + limit)


def _export_session(rng, tenant, t0, fixed_at, counter):
    """A client's export run: its tenant, id, page size, start and cursor kind; the pages fetched so far."""
    return {"tenant": tenant, "export": "ex_" + _hex(rng), "limit": rng.choice(LIMITS), "t": t0,
            "fixed": t0 >= fixed_at, "cur": None, "got": [], "pages": [], "id": next(counter)}


def write_logs(folder: str, seed: int = 5, count: int = 1500, fixed_at: float | None = None,
               tenants: int = 40, kinds: dict | None = None) -> dict:
    """Write a week under folder/{api,cdc,snapshot}; {export id: finished without a contact that existed
    throughout}. fixed_at (UTC seconds): when the cursor fix went out; by default on the second day. kinds: filled
    with the harmless anomaly kinds drawn (module docstring)."""
    met = {}  # harmless anomaly kind -> exports (the ground truth evidence_stats.py counts)

    def kind(name, s):
        met.setdefault(name, set()).add(s["export"])
    rng = random.Random(seed)
    if fixed_at is None:
        fixed_at = START + WEEK * rng.uniform(0.2, 0.32)
    names = ["tn_" + _hex(rng, 24) for _ in range(tenants)]
    tables, events, snapshot, bursts = {}, [], {}, {}
    for name in names:
        base = rng.randrange(10_000, 5_000_000)
        n0 = rng.randint(800, 3000)
        ids = sorted(rng.sample(range(base, base + 3 * n0), n0))
        tables[name] = _Table(ids)
        snapshot[name] = list(ids)
        busy = rng.uniform(0.3, 1.7)  # how much this tenant's contacts change
        for _ in range(int(rng.randint(150, 300) * 7 * busy)):
            ts = START + rng.uniform(0, WEEK)
            op = rng.choices(("insert", "delete", "update"), (0.5, 0.5, 1.2))[0]
            events.append((ts, 0, rng.random(), ("change", name, op)))
            if op != "update" and rng.random() < 0.3:  # a clean-up or an import: several changes in a minute or two
                bursts.setdefault(name, []).append(ts)
                for _ in range(rng.randint(2, 12)):
                    events.append((ts + rng.uniform(0.1, 120), 0, rng.random(), ("change", name, op)))
    weights = [1.0 / (k + 1) ** 0.5 for k in range(tenants)]
    counter = iter(range(10**9))
    sessions = []
    for _ in range(count):
        tenant = rng.choices(names, weights)[0]
        t0 = START + rng.uniform(0, WEEK - 3600)
        if bursts.get(tenant) and rng.random() < 0.25:  # a sync the tenant's change webhooks started
            t0 = min(rng.choice(bursts[tenant]) + rng.uniform(0, 90), START + WEEK - 3600)
        s = _export_session(rng, tenant, t0, fixed_at, counter)
        sessions.append(s)
        events.append((s["t"], 1, rng.random(), ("page", s)))
    heapq.heapify(events)
    lines, cdc, labels = [], [], {}
    while events:
        ts, _, _, ev = heapq.heappop(events)
        if ev[0] == "change":
            _, name, op = ev
            table = tables[name]
            if op == "insert":
                cid = table.next_id
                table.next_id += rng.randint(1, 3)
                table.ids.append(cid)
            elif op == "delete" and table.ids:
                # most deletions are of recent contacts (duplicates, spam sign-ups): ids near the end
                k = len(table.ids) - 1 - int(len(table.ids) * rng.random() ** 4) if rng.random() < 0.7 else \
                    rng.randrange(len(table.ids))
                cid = table.ids.pop(max(0, k))
            elif table.ids:
                cid = rng.choice(table.ids)
            else:
                continue
            cdc.append({"ts": round(ts, 3), "tenant": name, "op": op, "id": cid})
            continue
        s = ev[1]
        table = tables[s["tenant"]]
        host, cur_in = rng.choice(HOSTS), s["cur"]
        shown = None if cur_in is None else cursor("after" if s["fixed"] else "offset", cur_in)
        if rng.random() < P_503:
            lines.append(api_line(ts + 0.02, host, s["tenant"], s["export"], shown, s["limit"], 503, None, None, 20))
            heapq.heappush(events, (ts + rng.uniform(1.0, 5.0), 1, rng.random(), ev))
            kind("page_retried_after_503", s)
            continue
        if not s["pages"]:
            s["alive_first"] = set(table.ids)
        ids, nxt = table.page(cur_in, s["limit"], s["fixed"])
        ms = rng.randint(30, 400) + len(ids) // 2
        s["got"] += ids
        s["pages"].append(ts)
        lines.append(api_line(ts + ms / 1000, host, s["tenant"], s["export"], shown, s["limit"], 200,
                              None if nxt is None else cursor("after" if s["fixed"] else "offset", nxt), ids, ms))
        if nxt is None:  # finished: hurt when a contact that existed throughout was never exported
            missed = (s["alive_first"] & set(table.ids)) - set(s["got"])
            labels[s["export"]] = bool(missed)
            if s["alive_first"] - set(table.ids) - set(s["got"]):
                kind("contact_deleted_before_read", s)
            if set(table.ids) - s["alive_first"]:
                kind("contact_inserted_during_export", s)
            continue
        if rng.random() < P_ABANDON:
            labels[s["export"]] = False
            kind("abandoned_half_way", s)
            continue
        s["cur"] = nxt
        heapq.heappush(events, (ts + ms / 1000 + rng.uniform(0.5, 9.0), 1, rng.random(), ev))
    for s in sessions:
        s.pop("alive_first", None)
    repeated = {}
    write_folder(folder, lines, cdc, snapshot, rng, repeated)
    if kinds is not None:
        kinds.update({name: len(exports & labels.keys()) for name, exports in met.items()})
        kinds["repeated_log_line"] = (repeated["lines"], repeated["of"], "api lines")
    return labels


def write_folder(folder: str, lines: list[dict], cdc: list[dict], snapshot: dict, rng: random.Random | None = None,
                 repeated: dict | None = None):
    """Write access-log lines, change rows and snapshots in the production layout under folder. repeated: filled
    with the access-log lines written twice and all access-log lines written ({"lines", "of"})."""
    twice = written = 0
    rng = rng or random.Random(0)
    for sub in ("api", "cdc", "snapshot"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    by_hour = {}
    for line in lines:
        hour = int((line["ts"] - START) // 3600)
        by_hour.setdefault((line["host"], hour), []).append(line)
    for (host, hour), group in sorted(by_hour.items()):
        group.sort(key=lambda x: x["ts"])
        n = len(group)
        group += [dict(x) for x in group if rng.random() < P_DUP]  # at-least-once shipping
        twice, written = twice + len(group) - n, written + len(group)
        with open(os.path.join(folder, "api", "api-%s-d%d-h%02d.jsonl" % (host, hour // 24, hour % 24)), "w") as f:
            f.writelines(json.dumps(x, separators=(",", ":")) + "\n" for x in group)
    if repeated is not None:
        repeated.update(lines=twice, of=written)
    by_cdc = {}
    for row in cdc:
        by_cdc.setdefault(int((row["ts"] - START) // 3600), []).append(row)
    for hour, rows in sorted(by_cdc.items()):
        rows.sort(key=lambda r: r["ts"])
        with open(os.path.join(folder, "cdc", "cdc-d%d-h%02d.csv" % (hour // 24, hour % 24)), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=CDC_FIELDS)
            w.writeheader()
            w.writerows(rows)
    for tenant, ids in sorted(snapshot.items()):
        with open(os.path.join(folder, "snapshot", tenant + ".csv"), "w") as f:
            f.write("id\n")
            f.writelines("%d\n" % i for i in ids)


def _build(repo: str) -> None:
    """The pinned release and its history (the shared sdist_repo.py, a byte-identical copy next to this file)."""
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("sdist_repo", os.path.join(here, "sdist_repo.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build(repo)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: generate.py REPO")
    _build(sys.argv[1])
    write_logs(os.path.join(sys.argv[1], "logs"))
