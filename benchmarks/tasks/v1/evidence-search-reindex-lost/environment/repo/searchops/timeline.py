"""One product's story across the exports (docs/runbook.md): commits, indexer lines, the reindex pages that read
it, alias swaps and the sampled answers, in time order."""

from searchops import feeds, reindex


def of_product(log_dir, doc):
    """[(ts, source, text)] in time order."""
    rows = [(c["ts"], "cdc", "%s v%d (%s)" % (c["op"], c["version"], c["change"]))
            for c in feeds.iter_changes(log_dir) if c["doc"] == doc]
    for x in feeds.iter_indexer(log_dir):
        if x.doc != doc:
            continue
        if isinstance(x, feeds.Skip):
            rows.append((x.ts, x.indexer, "skip v%d (older)" % x.version))
        else:
            rows.append((x.ts, x.indexer, "%s v%d -> %s" % (x.op, x.version, ",".join(x.indexes))))
    for run in reindex.runs(log_dir):
        page = run.page_of(doc)
        if page is not None:
            rows.append((page[0], "reindex", "page of %s read (%s..%s)" % (run.index, page[1], page[2])))
        if run.outcome == "swapped":
            rows.append((run.end, "reindex", "alias moved to %s" % run.index))
    for a in feeds.iter_answers(log_dir):
        if a["doc"] == doc:
            rows.append((a["ts"], a["node"], "answered v%d for %r" % (a["version"], a["query"])))
    return sorted(rows)


def render(rows):
    return "\n".join("%.3f  %-8s %s" % row for row in rows)
