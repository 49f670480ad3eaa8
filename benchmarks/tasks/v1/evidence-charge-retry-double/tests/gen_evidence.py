"""A week of production logs of a payments API, from a seed (stdlib only).

    python generate.py REPO     builds REPO from its pinned braintree release and history (sdist_repo.py, a copy
                                of the suite's shared script next to this file: the release the payments team's
                                card processor client is built on, then its payops/ tools as a commit), then
                                writes REPO/logs/ (seed 7, 6,000 purchases: ≈ 530 files, ≈ 25 MB)

Two sources, joined by trace id:
  logs/gateway/gw-<host>-d<day>-h<hour>.jsonl  one line per upstream attempt of every API call (at-least-once)
  logs/ledger/ledger-<shard>-d<day>.csv        the ledger shards' exports: one row per transaction (at-least-once,
                                                a row can reappear in the next day's export)

The server's bug (fixed in production at a point of the week, not in any repository): the ledger looked an
Idempotency-Key up on the shard the attempt was routed to only. When an attempt timed out at the gateway after
the ledger had written the charge, and the retry was routed to another shard, the customer was charged a second
time. After the fix the key is looked up across shards and the retry answers the first transaction. Harmless
anomalies: timeouts before the ledger wrote anything, retries routed to the same shard, client-side retries with
a new request id that are deduplicated, customers buying the same item twice within minutes (two keys), refunds,
repeated gateway lines and export rows, 5xx and timeouts on other routes.

The verifier's setup.py imports this file (a copy in tests/) to draw fresh weeks with other seeds and other
fix times; `write_logs` returns the true labels ({idempotency key: charged more than once}); given a dict as
`kinds`, it also fills in the harmless anomaly kinds drawn ({kind: purchases}, or (lines, all lines, unit) for the
repeated gateway lines and export rows) for benchmarks/evidence_stats.py.
"""

from __future__ import annotations

import csv
import json
import os
import random
import sys

WEEK_S = 7 * 24 * 3600
START = 1_701_043_200  # 2023-11-27T00:00:00Z
HOSTS = ("edge-1", "edge-2", "edge-3")
SHARDS = ("s0", "s1", "s2", "s3")
PRICES = (499, 999, 1299, 1999, 2499, 4999, 9900)
FILLER_ROUTES = (("GET /v1/balance", 0.45), ("GET /v1/charges/{id}", 0.25), ("POST /v1/sessions", 0.15),
                 ("GET /v1/customers/{id}", 0.1), ("POST /v1/webhooks/ack", 0.05))
LEDGER_FIELDS = ("txn", "account", "kind", "amount_cents", "currency", "created", "trace")
P_TIMEOUT = 0.2  # an attempt times out at the gateway (30 s)


def _hex(rng: random.Random, bits: int = 48) -> str:
    return "%0*x" % (bits // 4, rng.getrandbits(bits))


def gateway_line(ts, host, route, req, key, attempt, shard, status, trace, txn, ms, account=None):
    """One gateway line (the field order of production)."""
    return {"ts": round(ts, 3), "host": host, "route": route, "req": req, "key": key, "account": account,
            "attempt": attempt, "upstream": shard, "status": status, "trace": trace, "txn": txn, "ms": ms}


def ledger_row(txn, account, kind, amount, created, trace):
    return {"txn": txn, "account": account, "kind": kind, "amount_cents": amount, "currency": "EUR",
            "created": round(created, 3), "trace": trace}


def purchase(rng: random.Random, key: str, account: str, amount: int, t0: float, fixed_at: float,
             kinds: set | None = None):
    """One purchase (all its API calls): (gateway lines, ledger rows as (shard, row), charged more than once).
    kinds: the harmless anomaly kinds the purchase met are added to it."""
    kinds = set() if kinds is None else kinds
    gateway, ledger, written = [], [], []  # written: (shard, txn) of every charge row the ledger wrote
    t, done = t0, False
    for client_try in range(2):
        req = "req_" + _hex(rng)
        for attempt in (1, 2):
            shard, trace, host = rng.choice(SHARDS), _hex(rng, 64), rng.choice(HOSTS)
            timeout = rng.random() < P_TIMEOUT
            if t >= fixed_at:  # the fix: the key is looked up on every shard
                existing = written[0][1] if written else None
            else:  # the bug: only on the shard this attempt was routed to
                existing = next((txn for s, txn in written if s == shard), None)
            if attempt == 2 and existing is not None and (t >= fixed_at or len(written) == 1):
                kinds.add("retry_deduplicated")  # on the same shard, or after the fix
            if existing is None and not (timeout and rng.random() < 0.5):  # a timeout may come before the write
                txn = "tx_" + _hex(rng)
                written.append((shard, txn))
                ledger.append((shard, ledger_row(txn, account, "charge", amount, t + rng.uniform(0.05, 0.9), trace)))
            else:
                txn = existing
                if timeout and existing is None:
                    kinds.add("timeout_before_write")
            ms = 30000 if timeout else rng.randint(40, 1400)
            gateway.append(gateway_line(t + ms / 1000, host, "POST /v1/charges", req, key, attempt, shard,
                                        504 if timeout else 200, trace, None if timeout else txn, ms, account))
            t += ms / 1000 + rng.uniform(0.2, 2.0)
            if not timeout:
                done = True
                break
        if done or rng.random() < 0.35:  # the client gives up, or retries the same key with a new request id
            break
        t += rng.uniform(2.0, 90.0)
        kinds.add("client_retry_new_request_id")
    if written and rng.random() < 0.12:  # a refund, hours later, with its own key
        kinds.add("refund")
        t += rng.uniform(600, 36000)
        shard, trace, txn = rng.choice(SHARDS), _hex(rng, 64), "tx_" + _hex(rng)
        ledger.append((shard, ledger_row(txn, account, "refund", -amount, t + 0.3, trace)))
        gateway.append(gateway_line(t + 0.4, rng.choice(HOSTS), "POST /v1/refunds", "req_" + _hex(rng),
                                    "rk_" + _hex(rng), 1, shard, 200, trace, txn, rng.randint(40, 900), account))
    return gateway, ledger, len(written) > 1


def filler(rng: random.Random, accounts: list[str]) -> dict:
    """A gateway line of another route (balance look-ups, sessions...), 5xx and timeouts included."""
    r, route = rng.random(), FILLER_ROUTES[-1][0]
    for name, p in FILLER_ROUTES:
        if r < p:
            route = name
            break
        r -= p
    u = rng.random()
    status = 200 if u < 0.93 else 404 if u < 0.96 else 429 if u < 0.98 else 500 if u < 0.993 else 504
    ms = 30000 if status == 504 else rng.randint(3, 600)
    return gateway_line(START + rng.uniform(0, WEEK_S), rng.choice(HOSTS), route, "req_" + _hex(rng), None, 1,
                        rng.choice(SHARDS) if "charges" in route else None, status, _hex(rng, 64), None, ms,
                        rng.choice(accounts))


def write_folder(folder: str, gateway: list[dict], ledger: list[tuple[str, dict]], rng: random.Random | None = None,
                 repeated: dict | None = None):
    """Write gateway lines and (shard, row) ledger rows in the production layout under folder. repeated: filled
    with the lines and rows written twice and all lines and rows written ({"lines", "of"})."""
    twice = lines_written = 0
    rng = rng or random.Random(0)
    by_hour, by_day = {}, {}
    for line in gateway:
        hour = int((line["ts"] - START) // 3600)
        by_hour.setdefault((line["host"], hour), []).append(line)
    for shard, row in ledger:
        day = int((row["created"] - START) // 86400)
        by_day.setdefault((shard, day), []).append(row)
        lines_written += 1
        if rng.random() < 0.1:  # exported again, sometimes with the next day's export
            by_day.setdefault((shard, day + (rng.random() < 0.4)), []).append(dict(row))
            twice, lines_written = twice + 1, lines_written + 1
    os.makedirs(os.path.join(folder, "gateway"), exist_ok=True)
    os.makedirs(os.path.join(folder, "ledger"), exist_ok=True)
    for (host, hour), lines in sorted(by_hour.items()):
        lines.sort(key=lambda x: x["ts"] + rng.uniform(-1.5, 1.5))  # the edge hosts' clocks disagree a little
        extra = [dict(x) for x in lines if rng.random() < 0.01]  # at-least-once shipping of log lines
        twice, lines_written = twice + len(extra), lines_written + len(lines) + len(extra)
        with open(os.path.join(folder, "gateway", "gw-%s-d%d-h%02d.jsonl" % (host, hour // 24, hour % 24)), "w") as f:
            f.writelines(json.dumps(x, separators=(",", ":")) + "\n" for x in lines + extra)
    if repeated is not None:
        repeated.update(lines=twice, of=lines_written)
    for (shard, day), rows in sorted(by_day.items()):
        rows.sort(key=lambda r: r["created"])
        with open(os.path.join(folder, "ledger", "ledger-%s-d%d.csv" % (shard, day)), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=LEDGER_FIELDS)
            w.writeheader()
            w.writerows(rows)


def write_logs(folder: str, seed: int = 7, count: int = 6000, fixed_at_frac: float | None = None,
               filler_per_purchase: int = 16, kinds: dict | None = None) -> dict:
    """Write a week of logs under folder/{gateway,ledger}; {idempotency key: charged more than once}. kinds: filled
    with the harmless anomaly kinds drawn (module docstring)."""
    met = {}  # harmless anomaly kind -> purchases (the ground truth evidence_stats.py counts)
    rng = random.Random(seed)
    fixed_at = START + WEEK_S * (fixed_at_frac if fixed_at_frac is not None else rng.uniform(0.2, 0.3))
    accounts = ["acct_" + _hex(rng, 32) for _ in range(max(50, count // 4))]
    labels, gateway, ledger = {}, [], []
    j = 0
    while j < count:
        account, amount, t0 = rng.choice(accounts), rng.choice(PRICES), START + rng.uniform(0, WEEK_S - 7200)
        repeats = 2 if rng.random() < 0.08 else 1  # the same item bought again within minutes (a second key)
        for _ in range(repeats):
            key = "ik_" + _hex(rng, 64)
            seen = {"bought_twice_within_minutes"} if repeats == 2 else set()
            g, led, labels[key] = purchase(rng, key, account, amount, t0, fixed_at, seen)
            for name in seen:
                met.setdefault(name, set()).add(key)
            gateway += g
            ledger += led
            t0 += rng.uniform(5.0, 600.0)
            j += 1
    gateway += [filler(rng, accounts) for _ in range(count * filler_per_purchase)]
    repeated = {}
    write_folder(folder, gateway, ledger, rng, repeated)
    if kinds is not None:
        kinds.update({name: len(keys) for name, keys in met.items()})
        kinds["repeated_line_or_row"] = (repeated["lines"], repeated["of"], "gateway lines and ledger rows")
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
