"""Clients a resolver sent an address the record no longer had, beyond what caching allows.

A resolver may send an outdated address only while the entry it fetched is alive (up to the record's TTL after a
successful upstream fetch by that node) or marked stale (TTL 30, after a failed fetch). An outdated answer
logged as a hit or a miss that no successful fetch of the node covers came from an expired entry re-armed
without a fetch: the client was hurt.
"""

import bisect
import json
import os


def _zone(log_dir):
    """{name: (times, values)} of the authoritative record, and {name: ttl}."""
    with open(os.path.join(log_dir, "zone", "snapshot.json")) as f:
        snap = json.load(f)
    history = {n: ([snap["ts"]], [r["value"]]) for n, r in snap["records"].items()}
    with open(os.path.join(log_dir, "zone", "changes.jsonl")) as f:
        changes = sorted((x["ts"], x["name"], x["value"]) for x in map(json.loads, f) if x)
    for ts, name, value in changes:
        history[name][0].append(ts)
        history[name][1].append(value)
    return history, {n: r["ttl"] for n, r in snap["records"].items()}


def _fetches(log_dir):
    """{(node, name): sorted times of successful upstream fetches}."""
    out = {}
    folder = os.path.join(log_dir, "upstream")
    for fname in os.listdir(folder):
        with open(os.path.join(folder, fname)) as f:
            for line in f:
                if line.strip():
                    x = json.loads(line)
                    if x["ok"]:
                        out.setdefault((x["node"], x["name"]), []).append(x["ts"])
    for times in out.values():
        times.sort()
    return out


def hurt_clients(log_dir):
    """The ids of the clients sent an outdated address by an entry no successful fetch kept alive."""
    history, ttls = _zone(log_dir)
    fetches = _fetches(log_dir)
    hurt = set()
    folder = os.path.join(log_dir, "resolvers")
    for node in sorted(os.listdir(folder)):
        for fname in sorted(os.listdir(os.path.join(folder, node))):
            with open(os.path.join(folder, node, fname)) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) != 7 or parts[6] not in ("hit", "miss"):
                        continue
                    ts, nd, client, name, answer = int(parts[0]), parts[1], parts[2], parts[3], parts[4]
                    times, values = history[name]
                    if answer == values[bisect.bisect_right(times, ts) - 1]:
                        continue
                    ok = fetches.get((nd, name), [])
                    k = bisect.bisect_right(ok, ts) - 1  # the last successful fetch at or before ts
                    if k < 0 or ts >= ok[k] + ttls[name]:
                        hurt.add(client)
    return sorted(hurt)
