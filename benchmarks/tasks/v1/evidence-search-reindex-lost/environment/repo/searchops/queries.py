"""Search traffic from the sampled answers: top queries, answers per node and hour, the products answered most."""

import collections

from searchops import feeds


def answers(log_dir):
    """[(ts, node, query, [(rank, doc, version)])], one per answer (rows grouped by ts, node and query)."""
    groups = collections.OrderedDict()
    for r in feeds.iter_answers(log_dir):
        groups.setdefault((r["ts"], r["node"], r["query"]), []).append((r["rank"], r["doc"], r["version"]))
    return [(ts, node, q, sorted(hits)) for (ts, node, q), hits in sorted(groups.items())]


def top_queries(log_dir, n=10):
    """[(query, answers)] most frequent first."""
    return collections.Counter(q for _, _, q, _ in answers(log_dir)).most_common(n)


def per_node_hour(log_dir):
    """{(node, hour since the first answer): answers}."""
    rows = answers(log_dir)
    if not rows:
        return {}
    t0 = rows[0][0] - rows[0][0] % 3600
    return dict(collections.Counter((node, int((ts - t0) // 3600)) for ts, node, _, _ in rows))


def top_products(log_dir, n=10):
    """[(doc, times answered)] most answered first."""
    return collections.Counter(r["doc"] for r in feeds.iter_answers(log_dir)).most_common(n)
