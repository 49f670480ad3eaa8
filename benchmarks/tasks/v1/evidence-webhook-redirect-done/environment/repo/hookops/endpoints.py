"""Endpoint health over a week of attempts, and the disable policy (docs/runbook.md)."""

import collections

from hookops import feeds, retry

DISABLE_STREAK = 50
DISABLE_AGE_S = 3 * 86400


def health(log_dir):
    """{endpoint: {"attempts", "failed", "redirects", "timeouts", "streak", "streak_since", "url"}}; failed counts
    attempts the outbox would not take as delivered; the streak is the run of failures at the end of the week."""
    out = {}
    for a in sorted(feeds.iter_attempts(log_dir), key=lambda a: a.ts):
        h = out.setdefault(a.endpoint, {"attempts": 0, "failed": 0, "redirects": 0, "timeouts": 0, "streak": 0,
                                        "streak_since": None, "url": a.url})
        if a.via:  # the followed request is part of the attempt before it
            h["url"] = a.url
        else:
            h["attempts"] += 1
        h["redirects"] += a.status.startswith("3")
        h["timeouts"] += a.status == "timeout"
        if a.status.startswith("3"):
            continue  # the followed request decides
        if retry.classify(a.status) == "delivered":
            h["streak"], h["streak_since"] = 0, None
        else:
            h["failed"] += 1
            h["streak"] += 1
            if h["streak_since"] is None:
                h["streak_since"] = a.ts
    return out


def verdict(h, now):
    """"disable", "watch" or "ok" for an endpoint's health row at time now."""
    if h["streak"] >= DISABLE_STREAK and now - h["streak_since"] > DISABLE_AGE_S:
        return "disable"
    if h["attempts"] and h["failed"] / h["attempts"] > 0.2:
        return "watch"
    return "ok"


def ranked(log_dir, now):
    """[(endpoint, failure share, verdict, row)] worst first."""
    rows = []
    for ep, h in health(log_dir).items():
        share = h["failed"] / h["attempts"] if h["attempts"] else 0.0
        rows.append((ep, share, verdict(h, now), h))
    rows.sort(key=lambda r: (-r[1], r[0]))
    return rows


def redirecting(log_dir):
    """{endpoint: Counter of redirect codes} for endpoints that answered any redirect."""
    out = collections.defaultdict(collections.Counter)
    for a in feeds.iter_attempts(log_dir):
        if a.status.startswith("3"):
            out[a.endpoint][a.status] += 1
    return dict(out)
