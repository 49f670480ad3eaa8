"""A week of a webhook platform's events, its delivery workers' logs and the outbox journal, from a seed (stdlib only).

    python generate.py REPO     builds REPO from its pinned requests release and history (sdist_repo.py, a copy of
                                the suite's shared script next to this file: the release the delivery workers
                                send with, then the platform team's hookops/ tools as a commit), then writes
                                REPO/logs/ (seed 5, 30,000 events: ≈ 850 files, ≈ 30 MB)

Three sources, joined by delivery id and time:
  logs/events/events-dDAY-hHOUR.jsonl  one line per event a tenant's account emitted: id, type, tenant, created,
                                       api_version and the payload (the endpoints subscribed get one delivery each)
  logs/workers/WORKER-dDAY-hHOUR.log   the delivery workers: `ISO WORKER DELIVERY EVENT ENDPOINT try=N METHOD URL ->
                                       STATUS MSms [via=3xx]` per HTTP attempt (STATUS: a code, `timeout` or
                                       `refused`; try=manual for a redelivery asked from the dashboard; via= on the
                                       request that followed a redirect); shipped at least once, so a line can repeat
  logs/outbox/journal-dDAY.csv         the outbox's state journal: delivery, event, endpoint, state (queued,
                                       retrying, delivered, dead, failed), at, attempts

The deliverer's bug (fixed in production at a point of the week, in no repository): a 3xx answer counted as
delivered, so a delivery to an endpoint that had moved (301/302/307/308 to its new address) was marked delivered
and never reached the customer. After the fix the worker follows the redirect once and the target's answer counts.
A delivery is hurt when the journal marks it delivered and no attempt of it had answered 2xx by then. Harmless
anomalies: redirects followed after the fix, dead letters after eight failed attempts and 4xx failures (the retries
are as designed), deliveries retried after 5xx or timeouts, attempts after delivery (dashboard redeliveries, a
worker whose lease ran out answering 409 or 200 after another worker delivered), repeated log lines.

The verifier's setup.py imports this file (a copy in tests/) to draw fresh weeks with other seeds and fix times;
`write_logs` returns the true labels ({delivery id: hurt}); given a dict as `kinds`, it also fills in the harmless
anomaly kinds drawn ({kind: deliveries}) for benchmarks/evidence_stats.py.
"""

from __future__ import annotations

import bisect
import csv
import datetime
import json
import os
import random
import sys

START = 1_702_252_800  # 2023-12-11T00:00:00Z
WEEK = 7 * 86400
WORKERS = ("w1", "w2", "w3", "w4")
BACKOFF = (30, 120, 600, 1800, 3600, 3 * 3600, 6 * 3600)  # seconds before attempts 2..8
MAX_ATTEMPTS = 8
LEASE_S = 20
JOURNAL_FIELDS = ("delivery", "event", "endpoint", "state", "at", "attempts")
TYPES = ("invoice.paid", "invoice.created", "customer.updated", "subscription.renewed", "subscription.canceled",
         "payment.failed", "refund.created", "checkout.completed")
REDIRECTS = (301, 302, 307, 308)
TLDS = ("io", "com", "dev", "app", "net")


def _hex(rng: random.Random, bits: int = 48) -> str:
    return "%0*x" % (bits // 4, rng.getrandbits(bits))


def iso(t: float) -> str:
    """UTC seconds as the workers write them (millisecond ISO 8601, Z)."""
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _episodes(rng, n, length):
    out = []
    for _ in range(rng.randint(*n)):
        s = START + rng.uniform(-86400, WEEK)
        out.append((s, s + rng.uniform(*length)))
    return sorted(out)


def _inside(spans, t):
    k = bisect.bisect_right(spans, (t, float("inf"))) - 1
    return k >= 0 and spans[k][0] <= t < spans[k][1]


class Endpoint:
    """One subscribed URL and how it answers over the week."""

    def __init__(self, rng: random.Random, tenant: str, k: int):
        self.id = "ep_%04d" % k
        host = "%s.%s" % (rng.choice(("hooks", "api", "events", "webhooks", "in")), tenant.replace("_", "-") + "."
                          + rng.choice(TLDS))
        self.url = "https://%s/%s" % (host, rng.choice(("webhooks", "hooks/billing", "stripe-like", "v1/events", "in")))
        self.new_url = "https://%s/%s" % (host.replace(host.split(".")[0], "hooks2", 1),
                                          rng.choice(("webhooks", "v2/events", "ingest")))
        self.flaky = 0.35 if rng.random() < 0.1 else 0.025
        self.outages = _episodes(rng, (1, 2), (12 * 3600, 4 * 86400)) if rng.random() < 0.2 else []
        self.moved = None  # from when the endpoint answers a redirect to new_url
        if rng.random() < 0.15:
            self.moved = START - 86400 if rng.random() < 0.75 else START + rng.uniform(0, WEEK)
            self.code = rng.choice(REDIRECTS)
        self.gone = START + rng.uniform(0, WEEK) if rng.random() < 0.03 else None
        self.slow = rng.uniform(30, 400)

    def answer(self, rng, t, follow=False):
        """(status, ms) of a POST at t (follow: to the new address, after a redirect)."""
        ms = int(rng.expovariate(1 / self.slow)) + 8
        if self.outages and _inside(self.outages, t):
            status = rng.choice(("503", "502", "timeout", "refused"))
            return status, {"timeout": 10_000, "refused": ms // 20 + 1}.get(status, ms)
        if not follow and self.gone is not None and t >= self.gone:
            return rng.choice(("410", "404")), ms
        if not follow and self.moved is not None and t >= self.moved:
            return str(self.code), ms // 3 + 5
        if rng.random() < self.flaky:
            status = rng.choice(("500", "502", "503", "504", "timeout", "timeout"))
            return status, 10_000 if status == "timeout" else ms
        if rng.random() < 0.004:
            return "400", ms
        return rng.choice(("200", "200", "200", "202", "204")), ms


def _payload(rng, etype, tenant, created):
    obj = {"id": "%s_%s" % (etype.split(".")[0][:3], _hex(rng, 64)), "object": etype.split(".")[0],
           "amount": rng.randrange(100, 500_000), "currency": rng.choice(("eur", "usd", "gbp")),
           "customer": "cus_" + _hex(rng, 56), "status": etype.split(".")[1],
           "metadata": {"order": "ord_%d" % rng.randrange(10**7), "channel": rng.choice(("web", "app", "pos"))},
           "lines": [{"price": "price_" + _hex(rng, 40), "quantity": rng.randint(1, 4),
                      "description": rng.choice(("Pro plan", "Seats", "Storage 100 GB", "Support", "Add-on"))}
                     for _ in range(rng.randint(1, 4))]}
    return {"type": etype, "tenant": tenant, "created": round(created, 3), "api_version": "2023-10-16",
            "livemode": True, "data": {"object": obj}, "request": {"id": "req_" + _hex(rng, 56),
                                                                   "idempotency_key": _hex(rng, 128)}}


def write_logs(folder: str, seed: int = 5, count: int = 30_000, fixed_at: float | None = None,
               tenants: int = 160, kinds: dict | None = None) -> dict:
    """Write a week under folder/{events,workers,outbox}; {delivery id: marked delivered on a redirect}.
    fixed_at (UTC seconds): when the deliverer's fix went out; by default on the first or second day. kinds: filled
    with the harmless anomaly kinds drawn (module docstring)."""
    met = {}  # harmless anomaly kind -> deliveries (the ground truth evidence_stats.py counts)

    def kind(name, did):
        met.setdefault(name, set()).add(did)
    rng = random.Random(seed)
    if fixed_at is None:
        fixed_at = START + WEEK * rng.uniform(0.12, 0.18)
    names = sorted({"acme%d_%s" % (k, _hex(rng, 16)) for k in range(tenants)})
    endpoints, k = {}, 0
    for t in names:
        endpoints[t] = []
        for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
            k += 1
            endpoints[t].append(Endpoint(rng, t, k))
    weights = [1.0 / (i + 1) ** 0.7 for i in range(len(names))]
    backlog = _episodes(rng, (6, 10), (600, 2400))  # the outbox queue falls behind
    events, lines, journal, labels = [], [], [], {}
    for _ in range(count):
        tenant = rng.choices(names, weights)[0]
        created = START + rng.uniform(0, WEEK)
        etype = rng.choice(TYPES)
        eid = "evt_" + _hex(rng, 64)
        events.append(dict({"id": eid}, **_payload(rng, etype, tenant, created)))
        for ep in endpoints[tenant]:
            did = "dl_" + _hex(rng, 64)
            journal.append((created + 0.01, did, eid, ep.id, "queued", 0))
            t = created + (rng.uniform(20, 400) if _inside(backlog, created) else rng.uniform(0.05, 2.0))
            state, hurt, delivered_at, attempt = None, False, None, 0

            def log(at, worker, tr, url, status, ms, via=None):
                lines.append((at, "%s %s %s %s %s try=%s POST %s -> %s %dms%s" % (
                    iso(at), worker, did, eid, ep.id, tr, url, status, ms, " via=%s" % via if via else "")))

            while state is None:
                attempt += 1
                worker = rng.choice(WORKERS)
                status, ms = ep.answer(rng, t)
                done = t + ms / 1000
                race = status[0] == "2" and rng.random() < 0.04  # a lease runs out under a slow answer
                if race:
                    done = t + rng.uniform(LEASE_S + 1, LEASE_S + 15)
                    other = rng.choice([w for w in WORKERS if w != worker])
                    t2 = t + LEASE_S + rng.uniform(0.05, 0.5)
                    s2, ms2 = ep.answer(rng, t2)
                    if s2[0] == "2":
                        log(t2 + ms2 / 1000, other, attempt + 1, ep.url, s2, ms2)
                        late = rng.choice(("409", "409", "409", "200"))  # a duplicate to the receiver
                        log(done, worker, attempt, ep.url, late, int((done - t) * 1000))
                        state, delivered_at, attempt = "delivered", t2 + ms2 / 1000, attempt + 1
                        kind("lease_ran_out_duplicate_answer", did)
                        break
                log(done, worker, attempt, ep.url, status, ms)
                if status[0] == "3":
                    if t < fixed_at:  # the bug: the redirect counts as delivered
                        state, delivered_at, hurt = "delivered", done, True
                        break
                    s2, ms2 = ep.answer(rng, done + 0.01, follow=True)
                    kind("redirect_followed_after_fix", did)
                    done = done + 0.01 + ms2 / 1000
                    log(done, worker, attempt, ep.new_url, s2, ms2, via=status)
                    status = s2
                if status[0] == "2":
                    state, delivered_at = "delivered", done
                elif status[0] == "4":
                    state, delivered_at = "failed", done
                    kind("failed_4xx", did)
                elif attempt >= MAX_ATTEMPTS:
                    state, delivered_at = "dead", done
                    kind("dead_letter_after_8_attempts", did)
                else:
                    kind("retried_after_5xx_or_timeout", did)
                    journal.append((done + 0.02, did, eid, ep.id, "retrying", attempt))
                    t = done + BACKOFF[attempt - 1] * rng.uniform(0.9, 1.2)
            mark = delivered_at + rng.uniform(0.005, 0.3)
            journal.append((mark, did, eid, ep.id, state, attempt))
            labels[did] = hurt and mark < START + WEEK  # the week's journal holds the mark
            # redeliveries asked from the dashboard (customers who missed one ask more often)
            if rng.random() < (0.3 if hurt else 0.05 if state == "delivered" else 0.15):
                tm = delivered_at + rng.uniform(600, 2 * 86400)
                kind("dashboard_redelivery", did)
                status, ms = ep.answer(rng, tm)
                done = tm + ms / 1000
                log(done, rng.choice(WORKERS), "manual", ep.url, status, ms)
                if status[0] == "3" and tm >= fixed_at:
                    s2, ms2 = ep.answer(rng, done + 0.01, follow=True)
                    log(done + 0.01 + ms2 / 1000, rng.choice(WORKERS), "manual", ep.new_url, s2, ms2, via=status)
    repeated = set()
    write_folder(folder, events, lines, journal, rng, repeated)
    if kinds is not None:
        kinds.update({name: len(ids & labels.keys()) for name, ids in met.items()},
                     repeated_worker_line=len(repeated & labels.keys()))
    return labels


def write_folder(folder: str, events: list[dict], lines: list[tuple[float, str]], journal: list[tuple],
                 rng: random.Random | None = None, repeated: set | None = None):
    """Write events, (ts, text) worker lines and (at, delivery, event, endpoint, state, attempts) journal rows in the
    production layout under folder (lines past the week are dropped, as the week's export would). repeated: the
    deliveries with a worker line shipped twice are added to it."""
    rng = rng or random.Random(0)
    for sub in ("events", "workers", "outbox"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    by_hour = {}
    for e in events:
        by_hour.setdefault(int((e["created"] - START) // 3600), []).append(e)
    for hour, group in sorted(by_hour.items()):
        group.sort(key=lambda e: e["created"])
        with open(os.path.join(folder, "events", "events-d%d-h%02d.jsonl" % (hour // 24, hour % 24)), "w") as f:
            f.writelines(json.dumps(e, separators=(",", ":")) + "\n" for e in group)
    by_file = {}
    for ts, text in lines:
        hour = int((ts - START) // 3600)
        if 0 <= hour < 168:
            by_file.setdefault((text.split()[1], hour), []).append((ts, text))
    for (worker, hour), group in sorted(by_file.items()):
        group.sort()
        n = len(group)
        group = [x for x in group for _ in range(2 if rng.random() < 0.06 else 1)]  # at-least-once shipping
        if repeated is not None and len(group) > n:
            repeated.update(a[1].split()[2] for a, b in zip(group, group[1:]) if a is b)
        with open(os.path.join(folder, "workers", "%s-d%d-h%02d.log" % (worker, hour // 24, hour % 24)), "w") as f:
            f.writelines(text + "\n" for _, text in group)
    by_day = {}
    for at, did, eid, ep, state, attempts in sorted(journal):
        day = int((at - START) // 86400)
        if 0 <= day < 7:
            by_day.setdefault(day, []).append({"delivery": did, "event": eid, "endpoint": ep, "state": state,
                                               "at": "%.3f" % at, "attempts": attempts})
    for day, rows in sorted(by_day.items()):
        with open(os.path.join(folder, "outbox", "journal-d%d.csv" % day), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=JOURNAL_FIELDS)
            w.writeheader()
            w.writerows(rows)


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
