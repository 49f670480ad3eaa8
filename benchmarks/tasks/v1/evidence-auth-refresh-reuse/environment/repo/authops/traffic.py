"""Gateway traffic per route: requests, error share and latency percentiles."""

import collections


def _quantile(sorted_values, q):
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def by_route(gateway):
    """{(method, path): {"requests", "errors" (5xx), "client_errors" (4xx), "p50_ms", "p99_ms"}} of requests."""
    groups = collections.defaultdict(list)
    for g in gateway:
        groups[(g["method"], g["path"])].append(g)
    out = {}
    for route, rows in sorted(groups.items()):
        ms = sorted(r["ms"] for r in rows)
        out[route] = {"requests": len(rows), "errors": sum(r["status"] >= 500 for r in rows),
                      "client_errors": sum(400 <= r["status"] < 500 for r in rows),
                      "p50_ms": _quantile(ms, 0.5), "p99_ms": _quantile(ms, 0.99)}
    return out


def by_upstream(gateway):
    """{upstream: requests}."""
    return dict(collections.Counter(g["upstream"] for g in gateway))
