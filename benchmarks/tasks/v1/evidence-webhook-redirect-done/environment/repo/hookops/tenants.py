"""Per-tenant delivery summary and the delivery SLA (share delivered within five minutes of the event)."""

import collections

from hookops import feeds

SLA_S = 300


def summary(log_dir):
    """{tenant: {"events", "deliveries", "endpoints", "delivered", "dead", "failed", "within_sla", "sla"}}."""
    tenant_of = {e["id"]: e["tenant"] for e in feeds.iter_events(log_dir)}
    created = {e["id"]: e["created"] for e in feeds.iter_events(log_dir)}
    out = collections.defaultdict(lambda: collections.Counter())
    endpoints = collections.defaultdict(set)
    events = collections.defaultdict(set)
    for did, d in feeds.deliveries(log_dir).items():
        tenant = tenant_of.get(d["event"])
        if tenant is None:
            continue
        row = out[tenant]
        row["deliveries"] += 1
        endpoints[tenant].add(d["endpoint"])
        events[tenant].add(d["event"])
        if d["state"]:
            row[d["state"]] += 1
        if d["state"] == "delivered" and d["at"] - created[d["event"]] <= SLA_S:
            row["within_sla"] += 1
    table = {}
    for tenant, row in sorted(out.items()):
        t = dict(row)
        t["events"], t["endpoints"] = len(events[tenant]), len(endpoints[tenant])
        t["sla"] = row["within_sla"] / row["deliveries"] if row["deliveries"] else None
        table[tenant] = t
    return table


def worst(table, n=10, minimum=20):
    """The n tenants with the lowest SLA among those with at least `minimum` deliveries."""
    rows = [(t, r) for t, r in table.items() if r["deliveries"] >= minimum and r["sla"] is not None]
    return sorted(rows, key=lambda x: (x[1]["sla"], x[0]))[:n]
