"""Product changes lost from the search index a reindex swapped in.

A reindex reads the products table page by page (each page as the table was when it was read) into a new index,
then moves the `products` alias to it. A change the indexer wrote only to the alias's index while that reindex was
building is missing from the new index when the reindex had read the product's page before the change was
committed (the change stream's `ts`); once the alias moves, search serves the older version. Aborted reindexes
never go live; changes written to both indexes, and changes to products the reindex read later, reach the new
index. Repeated change lines are one change.
"""

import bisect
import json
import os


def _changes(log_dir):
    """{(doc, version): (change id, commit ts)}."""
    out = {}
    folder = os.path.join(log_dir, "cdc")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                c = json.loads(line)
                out[(c["doc"], c["version"])] = (c["change"], c["ts"])
    return out


def _reindexes(log_dir):
    """[(start, end, new index, {first doc of a page: page time}, [first docs sorted])] of the reindexes that
    were swapped in."""
    events = []
    folder = os.path.join(log_dir, "indexer")
    for name in os.listdir(folder):
        if name.startswith("reindex-"):
            with open(os.path.join(folder, name)) as f:
                events.extend(line.split() for line in f if line.strip())
    events.sort(key=lambda p: float(p[0]))
    out, running = [], {}
    for p in events:
        t = float(p[0])
        if p[1] == "start":
            running[p[2]] = (t, {})
        elif p[1] == "page" and p[2] in running:
            running[p[2]][1][p[3]] = (t, p[4])
        elif p[1] == "swap" and p[4] in running:
            start, pages = running.pop(p[4])
            firsts = sorted(pages)
            out.append((start, t, p[4], pages, firsts))
        elif p[1] == "abort":
            running.pop(p[2], None)
    return sorted(out)


def lost_changes(log_dir):
    """The ids of the changes the index a reindex swapped in never got."""
    changes, reindexes = _changes(log_dir), _reindexes(log_dir)
    starts = [r[0] for r in reindexes]
    lost = set()
    folder = os.path.join(log_dir, "indexer")
    for name in os.listdir(folder):
        if not name.startswith("ix"):
            continue
        with open(os.path.join(folder, name)) as f:
            for line in f:
                p = line.split()
                if len(p) != 6 or p[2] not in ("write", "delete"):
                    continue
                t = float(p[0])
                k = bisect.bisect_right(starts, t) - 1
                if k < 0:
                    continue
                start, end, new, pages, firsts = reindexes[k]
                if t >= end or new in p[5].split(","):
                    continue
                j = bisect.bisect_right(firsts, p[3]) - 1
                if j < 0 or pages[firsts[j]][1] < p[3]:
                    continue  # not a page of this reindex
                read_at = pages[firsts[j]][0]
                change = changes.get((p[3], int(p[4])))
                if change is not None and read_at < change[1]:
                    lost.add(change[0])
    return sorted(lost)
