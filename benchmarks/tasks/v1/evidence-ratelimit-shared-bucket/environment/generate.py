"""A week of production logs of a public API's gateway and its customers' plans, from a seed (stdlib only).

    python generate.py REPO     builds REPO from its pinned limits release and history (sdist_repo.py, a copy of the
                                suite's shared script next to this file: the release the gateway's limiter is built
                                on, then the API platform team's quotaops/ tools as a commit), then writes
                                REPO/logs/ (seed 5, 1,000 API keys: ≈ 510 files, ≈ 25 MB)

Two sources:
  logs/gateway/gw-<host>-d<day>-h<hour>.jsonl  one line per request (at-least-once: some lines twice)
  logs/plans/plans.json, logs/plans/keys.csv   each key's per-minute limit over the week, and its organisation

The limiter's bug (fixed in production at a point of the week, not in any repository): it counted a minute's
admitted requests per organisation instead of per API key, so a key whose organisation's other keys were busy
was refused (429, reason rate_limit) although it was under its own limit. After the fix each key has its own
count. Harmless anomalies: keys over their own limit, keys whose plan changed during the week (the limit in force
at the time counts), load shedding (429, reason overload), repeated log lines, 5xx answers.

The verifier's setup.py imports this file (a copy in tests/) to draw fresh weeks with other seeds and other
fix times; `write_logs` returns the true labels ({API key: refused under its own limit at least once}).
"""

from __future__ import annotations

import csv
import json
import os
import random
import sys

WEEK_S = 7 * 24 * 3600
START = 1_701_043_200  # 2023-11-27T00:00:00Z
HOSTS = ("gw-1", "gw-2", "gw-3")
LIMITS = (20, 40, 60, 120)  # admitted requests per key and calendar minute, by plan
ROUTES = ("GET /v2/items", "GET /v2/items/{id}", "POST /v2/items", "GET /v2/search", "POST /v2/events")


def _hex(rng: random.Random, bits: int = 48) -> str:
    return "%0*x" % (bits // 4, rng.getrandbits(bits))


def limit_at(plan: list[dict], ts: float) -> int:
    """The limit in force at ts: the last plan entry whose `from` is not after ts."""
    return [p["limit"] for p in plan if p["from"] <= ts][-1]


def gateway_line(ts, host, req, key, route, status, reason, ms):
    return {"ts": round(ts, 3), "host": host, "req": req, "key": key, "route": route, "status": status,
            "reason": reason, "ms": ms}


def decide(requests, plans, org_of, fixed_at, shedding, rng, met=None):
    """Run the limiter over (ts, key) requests in time order: gateway lines and {key: refused under its limit}.
    met: {harmless anomaly kind: keys} it adds to."""
    per_key, per_org, lines, wrongful = {}, {}, [], {}
    met = {} if met is None else met
    for ts, key in requests:
        minute = int(ts // 60)
        own = per_key.get((key, minute), 0)
        bucket = per_org.get((org_of[key], minute), 0) if ts < fixed_at else own  # the bug: the org's count
        limit = limit_at(plans[key], ts)
        req, host, route = "q" + _hex(rng), rng.choice(HOSTS), rng.choice(ROUTES)
        if any(a <= ts < b for a, b in shedding) and rng.random() < 0.2:
            status, reason = 429, "overload"
            met.setdefault("load_shed_overload", set()).add(key)
        elif bucket >= limit:
            status, reason = 429, "rate_limit"
            if own < limit:
                wrongful[key] = True
            else:
                met.setdefault("over_own_limit", set()).add(key)
        else:
            status, reason = (200 if rng.random() < 0.995 else 503), None
            if status == 503:
                met.setdefault("answered_5xx", set()).add(key)
            per_key[(key, minute)] = own + 1
            per_org[(org_of[key], minute)] = per_org.get((org_of[key], minute), 0) + 1
        lines.append(gateway_line(ts, host, req, key, route, status, reason, rng.randint(3, 400)))
    return lines, wrongful


def write_folder(folder: str, lines: list[dict], plans: dict, org_of: dict, rng: random.Random,
                 repeated: set | None = None):
    """Write the gateway lines and the plan files in the production layout under folder. repeated: the keys with a
    line shipped twice are added to it."""
    os.makedirs(os.path.join(folder, "gateway"), exist_ok=True)
    os.makedirs(os.path.join(folder, "plans"), exist_ok=True)
    files = {}
    for x in lines:
        hour = int((x["ts"] - START) // 3600)
        files.setdefault("gw-%s-d%d-h%02d.jsonl" % (x["host"], hour // 24, hour % 24), []).append(x)
    for name, group in files.items():
        n = len(group)
        group = group + [dict(x) for x in group if rng.random() < 0.01]  # at-least-once shipping
        if repeated is not None:
            repeated.update(x["key"] for x in group[n:])
        group.sort(key=lambda x: x["ts"])
        with open(os.path.join(folder, "gateway", name), "w") as f:
            f.writelines(json.dumps(x, separators=(",", ":")) + "\n" for x in group)
    with open(os.path.join(folder, "plans", "plans.json"), "w") as f:
        json.dump(plans, f, indent=1, sort_keys=True)
    with open(os.path.join(folder, "plans", "keys.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["key", "org", "created"])
        w.writerows([k, org_of[k], START - rng.randint(86400, 400 * 86400)] for k in sorted(org_of))


def write_logs(folder: str, seed: int = 5, count: int = 1000, fixed_at_frac: float | None = None,
               kinds: dict | None = None) -> dict:
    """Write a week of logs under folder/{gateway,plans}; {API key: refused under its own limit at least once}.
    kinds: filled with the harmless anomaly kinds drawn ({kind: API keys}) for benchmarks/evidence_stats.py."""
    rng = random.Random(seed)
    fixed_at = START + WEEK_S * (fixed_at_frac if fixed_at_frac is not None else rng.uniform(0.18, 0.28))
    org_of, plans = {}, {}
    while len(org_of) < count:
        org = "org_" + _hex(rng, 32)
        for _ in range(1 if rng.random() < 0.6 else rng.randint(2, 4)):
            key = "ak_" + _hex(rng, 64)
            org_of[key] = org
            plans[key] = [{"from": START - 86400 * 30, "limit": rng.choice(LIMITS)}]
            if rng.random() < 0.14:  # an upgrade or a downgrade during the week
                plans[key].append({"from": START + rng.uniform(0.1, 0.9) * WEEK_S,
                                   "limit": rng.choice([x for x in LIMITS if x != plans[key][0]["limit"]])})
    orgs = {}
    for key, org in org_of.items():
        orgs.setdefault(org, []).append(key)
    requests = []

    def burst(key, t0, minutes, share):
        """Requests of one key at share x its limit for some minutes."""
        for m in range(minutes):
            rate = max(1, int(limit_at(plans[key], t0 + 60 * m) * share * rng.uniform(0.8, 1.2)))
            base = (int(t0 // 60) + m) * 60
            requests.extend((round(base + rng.uniform(0, 60), 3), key) for _ in range(rate))

    for org, keys in orgs.items():
        for _ in range(rng.randint(3, 5)):  # jobs of the organisation: one key, or several keys at once
            t0, minutes = START + rng.uniform(0, WEEK_S - 900), rng.randint(1, 4)
            who = keys if len(keys) > 1 and rng.random() < 0.045 else [rng.choice(keys)]
            for key in who:
                burst(key, t0, minutes, rng.uniform(0.3, 0.75) if len(who) > 1 else rng.uniform(0.05, 0.8))
        for key in keys:
            if rng.random() < 0.12:  # a job that goes over the key's own limit
                burst(key, START + rng.uniform(0, WEEK_S - 900), rng.randint(1, 3), rng.uniform(1.1, 1.6))
    requests.sort()
    shedding = [(a, a + 300) for a in (START + rng.uniform(0, WEEK_S - 300) for _ in range(100))]
    met, repeated = {}, set()
    lines, wrongful = decide(requests, plans, org_of, fixed_at, shedding, rng, met)
    write_folder(folder, lines, plans, org_of, rng, repeated)
    if kinds is not None:
        kinds.update({name: len(keys) for name, keys in met.items()}, repeated_gateway_line=len(repeated),
                     plan_changed_in_week=sum(1 for p in plans.values() if len(p) > 1))
    return {key: wrongful.get(key, False) for key in org_of}


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
