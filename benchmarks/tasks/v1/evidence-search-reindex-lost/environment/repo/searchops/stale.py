"""The staleness audit: sampled search answers that carried a version older than the table's (docs/runbook.md)."""

import bisect

from searchops import feeds


def stale_answers(log_dir, min_age=2.0):
    """[(answer ts, doc, served version, table version, age s)]: answers whose product had a newer version committed
    more than min_age seconds before the answer."""
    hist = feeds.history(log_dir)
    keys = {doc: [h[0] for h in rows] for doc, rows in hist.items()}
    out = []
    for a in feeds.iter_answers(log_dir):
        rows = hist.get(a["doc"])
        if not rows:
            continue
        k = bisect.bisect_right(keys[a["doc"]], a["ts"] - min_age) - 1
        if k >= 0 and rows[k][1] > a["version"]:
            older = [r for r in rows[:k + 1] if r[1] > a["version"]]
            out.append((a["ts"], a["doc"], a["version"], rows[k][1], a["ts"] - older[0][0]))
    return out


def by_doc(rows):
    """{doc: (answers, worst age)} of stale_answers rows."""
    out = {}
    for _, doc, _, _, age in rows:
        n, worst = out.get(doc, (0, 0.0))
        out[doc] = (n + 1, max(worst, age))
    return out
