"""Session timelines across nodes (docs/runbook.md)."""

import collections

from authops import feeds

LIFETIME_S = 30 * 86400


def by_family(log_dir):
    """{family: [Event] in time order}."""
    out = collections.defaultdict(list)
    for e in feeds.iter_auth(log_dir):
        fam = e.fields.get("fam")
        if fam:
            out[fam].append(e)
    for v in out.values():
        v.sort(key=lambda e: e.ts)
    return dict(out)


def timeline(log_dir, fam):
    """[(ts, node, verb, fields, device, ip)] of one session, with the gateway's device and address per request."""
    reqs = feeds.requests(log_dir, paths={"/oauth/token", "/oauth/revoke"})
    out = []
    for e in by_family(log_dir).get(fam, []):
        g = reqs.get(e.fields.get("req"), {})
        out.append((e.ts, e.node, e.verb, e.fields, g.get("dev"), g.get("ip")))
    return out


def generations(events):
    """The highest generation a session's events reached (1 before any refresh)."""
    top = 1
    for e in events:
        if e.verb == "refresh":
            top = max(top, e.fields["gen"][1])
    return top


def end_of(events):
    """(ts, how) of a session's end from its events ("expire", "logout:REASON", "revoke"), or None."""
    for e in events:
        if e.verb == "expire":
            return e.ts, "expire"
        if e.verb == "logout":
            return e.ts, "logout:" + e.fields.get("reason", "?")
        if e.verb == "reuse" and e.fields.get("action") == "revoke":
            return e.ts, "revoke"
    return None


def lifetime_left(created, now):
    """Seconds a session created at `created` has left at now (never negative)."""
    return max(0.0, created + LIFETIME_S - now)
