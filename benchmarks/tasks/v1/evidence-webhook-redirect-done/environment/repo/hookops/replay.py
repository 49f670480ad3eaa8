"""Replay plans: the dead letters of an endpoint to redeliver after the customer's fix (docs/runbook.md)."""

from hookops import feeds


def dead_letters(log_dir, endpoint):
    """[(dead at, delivery, event)] of the endpoint, oldest first."""
    rows = [(d["at"], k, d["event"]) for k, d in feeds.deliveries(log_dir).items()
            if d["endpoint"] == endpoint and d["state"] == "dead"]
    return sorted(rows)


def plan(log_dir, endpoint, limit=None):
    """The deliveries to redeliver: dead letters whose event no dashboard redelivery got a 2xx for."""
    redelivered = set()
    for a in feeds.iter_attempts(log_dir):
        if a.endpoint == endpoint and a.try_ == "manual" and a.status.startswith("2"):
            redelivered.add(a.event)
    out = [(at, d, e) for at, d, e in dead_letters(log_dir, endpoint) if e not in redelivered]
    return out if limit is None else out[:limit]
