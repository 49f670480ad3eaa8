"""Indexing lag (commit to indexer write) and the spans where the indexers fell behind (docs/runbook.md)."""

import collections

from searchops import feeds

BACKLOG_S = 60.0


def lags(log_dir):
    """[(write ts, lag s, doc, version)] of every write whose change is in the stream."""
    by_version = feeds.changes_by_version(log_dir)
    out = []
    for x in feeds.iter_indexer(log_dir):
        if isinstance(x, feeds.Write):
            c = by_version.get((x.doc, x.version))
            if c is not None:
                out.append((x.ts, x.ts - c["ts"], x.doc, x.version))
    return sorted(out)


def backlog_spans(log_dir, threshold=BACKLOG_S, gap=120.0):
    """[(first, last, worst lag)] of writes lagging more than threshold, merged when less than gap apart."""
    spans = []
    for ts, lag, _, _ in lags(log_dir):
        if lag <= threshold:
            continue
        if spans and ts - spans[-1][1] <= gap:
            first, _, worst = spans[-1]
            spans[-1] = (first, ts, max(worst, lag))
        else:
            spans.append((ts, ts, lag))
    return spans


def hourly_percentiles(log_dir, qs=(0.5, 0.99)):
    """{hour since the first write: [lag quantiles]}."""
    rows = lags(log_dir)
    if not rows:
        return {}
    t0 = rows[0][0] - rows[0][0] % 3600
    by_hour = collections.defaultdict(list)
    for ts, lag, _, _ in rows:
        by_hour[int((ts - t0) // 3600)].append(lag)
    out = {}
    for h, values in sorted(by_hour.items()):
        values.sort()
        out[h] = [values[min(len(values) - 1, int(q * len(values)))] for q in qs]
    return out
