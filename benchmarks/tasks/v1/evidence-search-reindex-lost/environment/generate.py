"""A week of a shop's product change stream, its search indexers' and reindex job's logs and the search query log,
from a seed (stdlib only).

    python generate.py REPO     builds REPO from its pinned Elasticsearch client release and history (sdist_repo.py,
                                a copy of the suite's shared script next to this file: the release the search
                                service is built on, then the search team's searchops/, docs/, tests/ as a
                                commit), then writes REPO/logs/ (seed 7, 60,000 changes: ≈ 680 files, ≈ 45 MB)

Three sources, joined by product, version and time:
  logs/cdc/changes-dDAY-hHOUR.jsonl    the products table's change stream: change, lsn, ts (commit), op (upsert or
                                       delete), doc, version and the row (title, price, stock, ...); delivered at
                                       least once, so a line can repeat
  logs/indexer/ixN-dDAY-hHOUR.log      the two indexers (products split by id parity): `TS ixN write DOC VERSION
                                       INDEX[,INDEX]`, `TS ixN delete DOC VERSION INDEX[,INDEX]`, `TS ixN skip DOC
                                       VERSION older` (a redelivered older version)
  logs/indexer/reindex-dDAY.log        the reindex job: `TS start NEW from OLD`, `TS page NEW FIRST LAST` (a page of
                                       500 products read from the table as it was then), `TS swap products OLD NEW`
                                       (the alias moved), `TS abort NEW REASON`
  logs/search/queries-dDAY-hHOUR.csv   sampled search answers: ts, node, query, rank, doc, version (as served)

The indexer's bug (fixed in production at a point of the week, in no repository): while a reindex was building the
next index, a change went to the alias's index only, so a product whose page the reindex had already read before
the change was committed reached the new index without it; after the alias swap search served the older version
(or a deleted product) until the product changed again. After the fix the indexer writes to both indexes while a
reindex builds. A change is hurt when it was lost that way. Harmless anomalies: changes during a reindex to
products it had not read yet (the page reads them), changes during a reindex after the fix, reindexes aborted
before the swap (the old index stays), search answering an older version for the second the index needs to
refresh, redelivered older versions skipped, repeated change lines.

The verifier's setup.py imports this file (a copy in tests/) to draw fresh weeks with other seeds and fix times;
`write_logs` returns the true labels ({change id: hurt}); given a dict as `kinds`, it also fills in the harmless
anomaly kinds drawn ({kind: changes}) for benchmarks/evidence_stats.py.
"""

from __future__ import annotations

import bisect
import csv
import heapq
import json
import os
import random
import sys

START = 1_702_857_600  # 2023-12-18T00:00:00Z
WEEK = 7 * 86400
PAGE = 500
REFRESH_S = 1.0
NODES = ("s1", "s2", "s3")
QUERY_FIELDS = ("ts", "node", "query", "rank", "doc", "version")
WORDS = ("linen", "shirt", "oak", "table", "lamp", "wool", "socks", "kettle", "steel", "desk", "chair", "rug",
         "blue", "green", "cotton", "mug", "vase", "towel", "boots", "jacket", "sofa", "pillow", "glass", "frame")
BRANDS = ("Nordvik", "Kestrel", "Halden", "Arbo", "Vela", "Osk", "Lumen", "Tarn")


def _hex(rng: random.Random, bits: int = 48) -> str:
    return "%0*x" % (bits // 4, rng.getrandbits(bits))


def _episodes(rng, n, length):
    out = []
    for _ in range(rng.randint(*n)):
        s = START + rng.uniform(0, WEEK)
        out.append((s, s + rng.uniform(*length)))
    return sorted(out)


def _inside(spans, t):
    k = bisect.bisect_right(spans, (t, float("inf"))) - 1
    return k >= 0 and spans[k][0] <= t < spans[k][1]


def doc_name(i: int) -> str:
    return "p_%06d" % i


def _row(rng, i, version):
    words = rng.sample(WORDS, 3)
    return {"title": "%s %s %s" % (rng.choice(BRANDS), words[0], words[1]), "price_cents": rng.randrange(299, 49_999),
            "stock": rng.randrange(0, 400), "category": words[2], "updated_by": rng.choice(("feed", "merch", "api")),
            "description": " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 40))),
            "attributes": {"color": rng.choice(("red", "blue", "black", "white", "green")),
                           "size": rng.choice(("S", "M", "L", "XL", "one")), "rev": version}}


def _reindexes(rng, docs):
    """[(start, name, old, pages [(t, first, last)], swap or None, abort (t, reason) or None)] every 6 hours."""
    out, gen = [], 412
    npages = (docs + PAGE - 1) // PAGE
    for k in range(28):
        start = START + k * 21600 + 1800 + rng.uniform(-300, 900)
        duration = rng.uniform(2700, 6000)
        name, old = "products-%04d" % (gen + 1), "products-%04d" % gen
        times = sorted(start + duration * rng.uniform(0.02, 0.97) for _ in range(npages))
        pages = [(t, p * PAGE + 1, min(docs, (p + 1) * PAGE)) for p, t in enumerate(times)]
        if rng.random() < 0.3:  # aborted part-way: the old index stays
            cut = rng.randrange(npages // 2, npages)
            out.append((start, name, old, pages[:cut], None,
                        (pages[cut - 1][0] + rng.uniform(5, 60), rng.choice(("cluster_yellow", "disk_watermark",
                                                                             "operator")))))
        else:
            out.append((start, name, old, pages, start + duration + rng.uniform(5, 40), None))
            gen += 1
    return out


def write_logs(folder: str, seed: int = 7, count: int = 60_000, fixed_at: float | None = None,
               docs: int = 30_000, queries: int = 40_000, kinds: dict | None = None) -> dict:
    """Write a week under folder/{cdc,indexer,search}; {change id: lost from the index a reindex swapped in}.
    fixed_at (UTC seconds): when the indexer's fix went out; by default on the third or fourth day. kinds: filled
    with the harmless anomaly kinds drawn (module docstring)."""
    met = {}  # harmless anomaly kind -> changes (the ground truth evidence_stats.py counts)

    def tally(name, change):
        met.setdefault(name, set()).add(change)
    rng = random.Random(seed)
    if fixed_at is None:
        fixed_at = START + WEEK * rng.uniform(0.45, 0.6)
    weights = [1.0 / (docs - i + 1) ** 0.9 for i in range(1, docs + 1)]  # new products (high ids) change most
    cum = []
    total = 0.0
    for w in weights:
        total += w
        cum.append(total)
    backlog = _episodes(rng, (6, 10), (300, 1800))  # the change stream falls behind
    # events: (time, order, kind, payload); order breaks ties: commits before writes before pages
    events = []
    commits = sorted(START + rng.uniform(-600, WEEK) for _ in range(count))
    versions, deleted = {}, set()
    changes = []
    for lsn, ts in enumerate(commits, 1):
        i = bisect.bisect_left(cum, rng.uniform(0, total)) + 1
        if i in deleted:
            continue
        versions[i] = versions.get(i, 1) + 1
        op = "delete" if rng.random() < 0.004 else "upsert"
        if op == "delete":
            deleted.add(i)
        c = {"change": "ch_" + _hex(rng, 64), "lsn": 1_000_000 + lsn, "ts": round(ts, 3), "op": op,
             "doc": doc_name(i), "version": versions[i], "row": _row(rng, i, versions[i]) if op == "upsert" else None}
        changes.append(c)
        lag = rng.uniform(20, 600) if _inside(backlog, ts) else rng.uniform(0.1, 2.5)
        events.append((c["ts"], 0, len(events), "commit", c))
        events.append((c["ts"] + lag, 1, len(events), "write", c))
        if rng.random() < 0.16:  # a redelivery, later
            events.append((c["ts"] + lag + rng.uniform(30, 900), 1, len(events), "write", c))
    reindexes = _reindexes(rng, docs)
    for r in reindexes:
        start, name, old, pages, swap, abort = r
        events.append((start, 2, len(events), "start", r))
        for page in pages:
            events.append((page[0], 2, len(events), "page", (name, page)))
        if swap is not None:
            events.append((swap, 2, len(events), "swap", r))
        else:
            events.append((abort[0], 2, len(events), "abort", r))
    for _ in range(queries):
        events.append((START + rng.uniform(0, WEEK), 3, len(events), "query", None))
    heapq.heapify(events)
    db = {}  # doc index -> (version, deleted) as committed
    indexes = {"products-0412": {}}
    live, building = "products-0412", None  # alias target; (name, index dict) of a running reindex
    first_page_of = {}  # building index: {doc -> page time} once read
    lost = set()  # changes the building index missed (hurt if it is swapped in)
    lines, rlines, qrows, labels = [], [], [], {}
    while events:
        t, _, _, kind, x = heapq.heappop(events)
        if kind == "commit":
            db[int(x["doc"][2:])] = (x["version"], x["op"] == "delete")
        elif kind == "write":
            i = int(x["doc"][2:])
            node = "ix%d" % (2 - i % 2)  # ix1 takes odd product numbers
            cur = indexes[live].get(i, (1, False))[0]
            if x["version"] <= cur:
                lines.append((t, "%.3f %s skip %s %d older" % (t, node, x["doc"], x["version"])))
                tally("redelivered_older_skipped", x["change"])
                continue
            targets = [live]
            if building is not None and t >= fixed_at:  # the fix: both indexes while a reindex builds
                targets.append(building)
            for name in targets:
                indexes[name][i] = (x["version"], x["op"] == "delete")
            if building is not None and building not in targets and first_page_of.get(i, t) < x["ts"]:
                lost.add(x["change"])
            elif building is not None:
                tally("during_reindex_after_fix" if building in targets else "during_reindex_before_page_read",
                     x["change"])
            lines.append((t, "%.3f %s %s %s %d %s" % (t, node, "delete" if x["op"] == "delete" else "write",
                                                      x["doc"], x["version"], ",".join(targets))))
        elif kind == "start":
            building = x[1]
            indexes[building] = {}
            first_page_of, lost = {}, set()
            rlines.append((t, "%.3f start %s from %s" % (t, x[1], x[2])))
        elif kind == "page":
            name, (pt, lo, hi) = x
            for i in range(lo, hi + 1):
                if i in db:
                    indexes[name][i] = db[i]
                first_page_of[i] = pt
            rlines.append((t, "%.3f page %s %s %s" % (t, name, doc_name(lo), doc_name(hi))))
        elif kind == "swap":
            rlines.append((t, "%.3f swap products %s %s" % (t, x[2], x[1])))
            del indexes[live]
            live, building = x[1], None
            labels.update(dict.fromkeys(lost, True))
        elif kind == "abort":
            rlines.append((t, "%.3f abort %s %s" % (t, x[1], x[5][1])))
            for change in lost:
                tally("missed_by_aborted_reindex", change)
            del indexes[x[1]]
            building = None
        else:  # a sampled search answer: up to five products, popular ones first, as the live index holds them
            q = " ".join(rng.sample(WORDS, rng.randint(1, 3)))
            node = rng.choice(NODES)
            hits = sorted({bisect.bisect_left(cum, rng.uniform(0, total)) + 1 for _ in range(rng.randint(1, 5))})
            for rank, i in enumerate(hits, 1):
                v, gone = indexes[live].get(i, (1, False))
                if not gone:
                    qrows.append((t, node, q, rank, doc_name(i), v))
    repeated = set()
    write_folder(folder, changes, lines, rlines, qrows, rng, repeated)
    out = {c["change"]: labels.get(c["change"], False) for c in changes if START <= c["ts"] < START + WEEK}
    if kinds is not None:
        kinds.update({name: len(ids & out.keys()) for name, ids in met.items()},
                     repeated_change_line=len(repeated & out.keys()))
    return out


def write_folder(folder: str, changes: list[dict], lines: list[tuple[float, str]], rlines: list[tuple[float, str]],
                 qrows: list[tuple], rng: random.Random | None = None, repeated: set | None = None):
    """Write changes, (ts, text) indexer lines, (ts, text) reindex lines and (ts, node, query, rank, doc, version)
    search rows in the production layout under folder (the week only). repeated: the changes delivered twice are
    added to it."""
    rng = rng or random.Random(0)
    for sub in ("cdc", "indexer", "search"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)

    def hour_of(ts):
        h = int((ts - START) // 3600)
        return h if 0 <= h < 168 else None

    by_hour = {}
    for c in changes:
        h = hour_of(c["ts"])
        if h is not None:
            by_hour.setdefault(h, []).append(c)
    for hour, group in sorted(by_hour.items()):
        group.sort(key=lambda c: c["lsn"])
        n = len(group)
        group = [c for c in group for _ in range(2 if rng.random() < 0.16 else 1)]  # at-least-once delivery
        if repeated is not None and len(group) > n:
            repeated.update(a["change"] for a, b in zip(group, group[1:]) if a is b)
        with open(os.path.join(folder, "cdc", "changes-d%d-h%02d.jsonl" % (hour // 24, hour % 24)), "w") as f:
            f.writelines(json.dumps(c, separators=(",", ":")) + "\n" for c in group)
    by_file = {}
    for ts, text in lines:
        h = hour_of(ts)
        if h is not None:
            by_file.setdefault("%s-d%d-h%02d.log" % (text.split()[1], h // 24, h % 24), []).append((ts, text))
    for ts, text in rlines:
        h = hour_of(ts)
        if h is not None:
            by_file.setdefault("reindex-d%d.log" % (h // 24), []).append((ts, text))
    for name, group in sorted(by_file.items()):
        group.sort()
        with open(os.path.join(folder, "indexer", name), "w") as f:
            f.writelines(text + "\n" for _, text in group)
    by_q = {}
    for row in qrows:
        h = hour_of(row[0])
        if h is not None:
            by_q.setdefault(h, []).append(row)
    for hour, rows in sorted(by_q.items()):
        rows.sort()
        with open(os.path.join(folder, "search", "queries-d%d-h%02d.csv" % (hour // 24, hour % 24)), "w",
                  newline="") as f:
            w = csv.writer(f)
            w.writerow(QUERY_FIELDS)
            w.writerows(("%.3f" % r[0],) + tuple(r[1:]) for r in rows)


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
