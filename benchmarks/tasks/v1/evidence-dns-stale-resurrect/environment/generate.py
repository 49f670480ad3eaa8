"""A week of a caching DNS resolver fleet's logs and the zone's change history, from a seed (stdlib only).

    python generate.py REPO     builds REPO from its pinned dnspython release and history (sdist_repo.py, a copy of
                                the suite's shared script next to this file: the release the network team's
                                scripts are built on, then its dnsops/ tools as a commit), then writes
                                REPO/logs/ (seed 10, 900 clients: 678 files, ≈ 43 MB)

Three sources, joined by node, name and time:
  logs/resolvers/NODE/dDAY-HH.log    one line per answer a resolver node sent: UTC seconds, node, client, name,
                                     answer (an address, or SERVFAIL), the TTL left, how it was answered
                                     (hit, miss: fetched upstream now, stale: expired entry served after a failed
                                     fetch); lines are shipped at least once, so a line can repeat
  logs/upstream/NODE.jsonl           every upstream fetch a node made: ts, node, name, ok, value and ttl when ok
  logs/zone/snapshot.json, logs/zone/changes.jsonl
                                     the authoritative zone at the start of the week and every record change

The resolvers' bug (fixed server-side at a point of the week, in no repository): when the upstream fetch that
should refresh an expired entry failed, the resolver re-armed the expired entry with a full TTL as if it had been
fetched, logged the answer as a miss, and kept serving it as hits until that TTL ran out, without trying upstream
again. After the fix it serves the expired entry marked stale (TTL 30) and retries on the next query. A client is
hurt when such a re-armed entry sent it an address the record no longer had. Harmless anomalies: outdated answers
still inside the TTL of a real fetch after a record change, stale-marked answers after the fix, SERVFAIL when no
entry exists, entries re-armed while the record did not change, fetches answered by a secondary that had not yet
picked up a change (the old address for a full TTL), repeated log lines, clients moving between nodes. Upstream
fetches fail in a node's outages (every name), now and then at random, and for a few minutes after a record change
on some nodes (the moved name's new records propagating): the bug shows up mostly there, before the fix.

The verifier's setup.py imports this file (a copy in tests/) to draw fresh weeks with other seeds and fix times;
`write_logs` returns the true labels (client id -> sent an outdated address by a re-armed entry); given a dict as
`kinds`, it also fills in the harmless anomaly kinds drawn ({kind: clients}, or (lines, all lines, unit) for the
repeated answer lines) for benchmarks/evidence_stats.py.
"""

from __future__ import annotations

import bisect
import json
import os
import random
import sys

START = 1_698_537_600  # 2023-10-29T00:00:00Z, the start of the week
WEEK = 7 * 86400
NODES = ("r1", "r2", "r3", "r4")
TTLS = (60, 300, 900, 1800)
STALE_TTL = 30  # the TTL a stale-marked answer carries
NAMES = 50  # names in the zone
CHANGES = (1, 3)  # record changes per name in the week
FLAPS = 0.28  # the chance that a node's fetches of a changed name fail for a few minutes after the change
SECONDARY = 0.05  # the share of record changes a secondary picks up late (its next zone transfer)
SECONDARY_LAG = (600, 3600)  # how late, seconds
REPEAT = 0.0006  # the share of answer lines shipped twice
FLAKY = 0.001  # the share of upstream fetches that fail outside outages


def _address(rng: random.Random) -> str:
    return "10.%d.%d.%d" % (rng.randrange(256), rng.randrange(256), rng.randrange(1, 255))


def _zone(rng: random.Random, names: int) -> tuple[dict, list]:
    """{name: {"value", "ttl"}} at the start, and the changes [(ts, name, value)] in time order."""
    snapshot, changes = {}, []
    for i in range(names):
        name = "%s%02d.%s" % (rng.choice(("api", "cdn", "auth", "db", "mq", "img")), i,
                              rng.choice(("example.net", "corp.example", "svc.example.org")))
        snapshot[name] = {"value": _address(rng), "ttl": rng.choice(TTLS)}
        for _ in range(rng.randint(CHANGES[0], CHANGES[1])):
            changes.append((START + rng.randrange(WEEK), name, _address(rng)))
    changes.sort()
    return snapshot, changes


def _outages(rng: random.Random, changes: list) -> dict:
    """node -> sorted [(start, end, name)] windows in which the node's upstream fetches fail (name None: every name):
    an outage or two per node at random, and a node's fetches of a changed name failing for a few minutes after
    the change (its new records propagating)."""
    out = {node: [] for node in NODES}
    for node in NODES:
        for _ in range(rng.randint(1, 2)):
            s = START + rng.randrange(WEEK)
            out[node].append((s, s + rng.randint(60, 600), None))
    for ts, name, _ in changes:
        for node in NODES:
            if rng.random() < FLAPS:
                s = ts + rng.randint(0, 300)
                out[node].append((s, s + rng.randint(30, 240), name))
    return {node: sorted(spans) for node, spans in out.items()}


def write_logs(folder: str, seed: int = 10, count: int = 900, fixed_at: float | None = None,
               kinds: dict | None = None) -> dict:
    """Write a week under folder/{resolvers,upstream,zone}; {client id: hurt by a re-armed entry} (the labels).

    fixed_at (UTC seconds): when the resolver fix went out; by default on the fourth or the fifth day. kinds: filled
    with the harmless anomaly kinds drawn (module docstring)."""
    met = {}  # harmless anomaly kind -> clients (the ground truth evidence_stats.py counts)

    def kind(name, cid):
        met.setdefault(name, set()).add(cid)
    rng = random.Random(seed)
    if fixed_at is None:
        fixed_at = START + rng.choice((3, 4)) * 86400 + rng.randrange(86400)
    snapshot, changes = _zone(rng, NAMES)
    names = sorted(snapshot)
    weights = [1.0 / (k + 1) ** 0.7 for k in range(len(names))]
    rng.shuffle(weights)
    for rank, k in enumerate(sorted(range(len(names)), key=lambda k: -weights[k])):  # busy names: short TTLs
        snapshot[names[k]]["ttl"] = TTLS[0] if rank < 8 else TTLS[1] if rank < 20 else rng.choice(TTLS[2:])
    history = {n: ([START], [snapshot[n]["value"]]) for n in names}
    for ts, name, value in changes:
        history[name][0].append(ts)
        history[name][1].append(value)

    def authoritative(name, ts):
        times, values = history[name]
        return values[bisect.bisect_right(times, ts) - 1]

    lagged = {n: [START] for n in names}  # until when a secondary still serves the value before each change
    for ts, name, _ in changes:
        lagged[name].append(ts + (rng.uniform(*SECONDARY_LAG) if rng.random() < SECONDARY else 0))

    def fetched(name, ts):
        """What an upstream fetch returns: a lagging secondary answers half the fetches with the previous value."""
        times, values = history[name]
        k = bisect.bisect_right(times, ts) - 1
        return values[k - 1] if k > 0 and ts < lagged[name][k] and rng.random() < 0.5 else values[k]

    outages = _outages(rng, changes)
    clients, queries = [], []
    for j in range(count):
        cid = "c%04d%s%03d" % (rng.randrange(10000), chr(97 + j % 26), j)
        clients.append(cid)
        home = rng.choice(NODES)
        for _ in range(rng.randint(300, 500)):
            node = home if rng.random() < 0.9 else rng.choice(NODES)
            if node != home:
                kind("moved_between_nodes", cid)
            queries.append((START + rng.randrange(WEEK), node, cid, rng.choices(names, weights)[0]))
    queries.sort()
    labels = dict.fromkeys(clients, False)
    cache, lines, fetches = {}, {}, {n: [] for n in NODES}
    repeated = written = 0
    for ts, node, cid, name in queries:
        ttl = snapshot[name]["ttl"]
        entry = cache.get((node, name))  # [value, fetched_at, rearmed]
        if entry is not None and ts < entry[1] + ttl:
            answer, left, how = entry[0], entry[1] + ttl - ts, "hit"
            if entry[2] and answer != authoritative(name, ts):
                labels[cid] = True
            elif entry[2]:
                kind("rearmed_unchanged_record", cid)
            elif answer != authoritative(name, ts):
                kind("outdated_inside_fetched_ttl", cid)
        else:
            down = any(s <= ts < e and z in (None, name) for s, e, z in outages[node]) or rng.random() < FLAKY
            if not down:
                value = fetched(name, ts)
                fetches[node].append({"ts": ts, "node": node, "name": name, "ok": True, "value": value, "ttl": ttl})
                cache[(node, name)] = [value, ts, False]
                answer, left, how = value, ttl, "miss"
                if value != authoritative(name, ts):
                    kind("lagging_secondary_old_address", cid)
            else:
                fetches[node].append({"ts": ts, "node": node, "name": name, "ok": False})
                if entry is None:
                    answer, left, how = "SERVFAIL", 0, "fail"
                    kind("servfail_no_entry", cid)
                elif ts < fixed_at:  # the bug: the expired entry re-armed as if fetched now
                    cache[(node, name)] = [entry[0], ts, True]
                    answer, left, how = entry[0], ttl, "miss"
                    if answer != authoritative(name, ts):
                        labels[cid] = True
                    else:
                        kind("rearmed_unchanged_record", cid)
                else:  # the fix: serve stale, retry on the next query
                    answer, left, how = entry[0], STALE_TTL, "stale"
                    kind("stale_marked_after_fix", cid)
        line = "%d %s %s %s %s %d %s\n" % (ts, node, cid, name, answer, left, how)
        hour = (ts - START) // 3600
        bucket = lines.setdefault((node, hour), [])
        bucket.append(line)
        written += 1
        if rng.random() < REPEAT:  # at-least-once shipping
            bucket.append(line)
            repeated, written = repeated + 1, written + 1
    for node in NODES:
        os.makedirs(os.path.join(folder, "resolvers", node), exist_ok=True)
        for hour in range(WEEK // 3600):
            with open(os.path.join(folder, "resolvers", node, "d%d-%02d.log" % divmod(hour, 24)), "w") as f:
                f.writelines(lines.get((node, hour), []))
    os.makedirs(os.path.join(folder, "upstream"), exist_ok=True)
    for node, rows in fetches.items():
        with open(os.path.join(folder, "upstream", node + ".jsonl"), "w") as f:
            f.writelines(json.dumps(x, separators=(",", ":")) + "\n" for x in rows)
    os.makedirs(os.path.join(folder, "zone"), exist_ok=True)
    with open(os.path.join(folder, "zone", "snapshot.json"), "w") as f:
        json.dump({"ts": START, "records": snapshot}, f, indent=0, sort_keys=True)
    with open(os.path.join(folder, "zone", "changes.jsonl"), "w") as f:
        f.writelines(json.dumps({"ts": ts, "name": n, "value": v}) + "\n" for ts, n, v in changes)
    if kinds is not None:
        kinds.update({name: len(cids) for name, cids in met.items()})
        kinds["repeated_answer_line"] = (repeated, written, "answer lines")
    return labels


def _build(repo: str) -> None:
    """The pinned release and its history (the shared sdist_repo.py, a byte-identical copy next to this file)."""
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("sdist_repo", os.path.join(here, "sdist_repo.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build(repo)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: generate.py REPO")
    _build(sys.argv[1])
    write_logs(os.path.join(sys.argv[1], "logs"))
