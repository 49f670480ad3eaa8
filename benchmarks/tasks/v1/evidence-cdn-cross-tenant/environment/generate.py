"""A week of production logs of a multi-tenant storefront API behind an edge cache, from a seed (stdlib only).

    python generate.py REPO     builds REPO from its pinned requests-cache release and history (sdist_repo.py, a
                                copy of the suite's shared script next to this file: the release the storefront
                                platform team's tools are built on, then its edgeops/ tools as a commit), then
                                writes REPO/logs/ (seed 3, 10,000 sessions: ≈ 700 files, ≈ 25 MB)

Two sources, joined by request id:
  logs/edge/<pop>-d<day>-h<hour>.log   the edge caches' access logs, one text line per request
  logs/origin/<node>-d<day>.jsonl      the origin's responses to the edge's misses and revalidations

The edge's bug (fixed in production at a point of the week, not in any repository): for the catalog routes the
cache key left out the tenant, so a session could be served the catalog another tenant's session had put in the
cache on the same point of presence. Harmless anomalies: public assets shared by every tenant from one cache
entry, stale catalog versions of the session's own tenant (served within the TTL after the catalog changed, or
while revalidating), bypassed routes, origin errors and timeouts, searches the edge's rate limiter refused itself
(429), sessions spread over two points of presence.

The verifier's setup.py imports this file (a copy in tests/) to draw fresh weeks with other seeds and other
fix times; `write_logs` returns the true labels ({session id: served another tenant's catalog}); given a dict as
`kinds`, it also fills in the harmless anomaly kinds drawn ({kind: sessions}) for benchmarks/evidence_stats.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import time

WEEK_S = 7 * 24 * 3600
START = 1_701_043_200  # 2023-11-27T00:00:00Z
POPS = ("fra1", "iad1", "sin1", "gru1")
NODES = ("origin-a", "origin-b", "origin-c")
CATEGORIES = ("shoes", "bags", "outdoor", "kitchen", "garden", "toys", "books", "sports")
ASSETS = ("/static/app.js", "/static/app.css", "/static/logo.svg", "/static/fonts/inter.woff2")
TTL = {"catalog": 600.0, "asset": 3600.0, "search": 60.0}
STALE_GRACE_S = 120.0  # an expired entry is served once more while the edge revalidates it
AGENTS = ("Mozilla/5.0 (Macintosh)", "Mozilla/5.0 (Windows NT 10.0)", "Mozilla/5.0 (iPhone)", "okhttp/4.11.0")


def _hex(rng: random.Random, bits: int = 48) -> str:
    return "%0*x" % (bits // 4, rng.getrandbits(bits))


def stamp(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + ".%03dZ" % int(ts % 1 * 1000)


def etag(*parts) -> str:
    return hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest()[:16]


def edge_line(ts, pop, req, session, tenant, path, status, cache, size, tag, ms, agent) -> tuple[str, float, str]:
    """(pop, ts, line) of an edge access log: `TIME POP REQ SESSION TENANT "GET PATH" STATUS CACHE BYTES "ETAG" MS "UA"`."""
    return pop, ts, '%s %s %s %s %s "GET %s" %d %s %d "%s" %dms "%s"' % (
        stamp(ts), pop, req, session, tenant, path, status, cache, size, tag, ms, agent)


def origin_line(ts, node, req, tenant, path, status, tag, scope, max_age, ms) -> dict:
    return {"ts": round(ts, 3), "node": node, "edge_req": req, "tenant": tenant, "path": path, "status": status,
            "etag": tag, "scope": scope, "max_age": max_age, "ms": ms}


class Week:
    """The edge caches, the catalogs' versions and the lines of both sources."""

    def __init__(self, rng: random.Random, tenants: list[str], fixed_at: float):
        self.rng, self.tenants, self.fixed_at = rng, tenants, fixed_at
        self.cache = {}  # key -> (etag, tenant the entry was fetched for, expires, size)
        self.edge, self.origin = [], []
        self.kinds = {}  # harmless anomaly kind -> sessions (the ground truth evidence_stats.py counts)
        # each tenant's catalog changes a few times a week: sorted change times per (tenant, category)
        self.changes = {(t, c): sorted(START + rng.uniform(0, WEEK_S) for _ in range(rng.randint(0, 6)))
                        for t in tenants for c in CATEGORIES}

    def version(self, tenant: str, category: str, ts: float) -> int:
        return sum(1 for x in self.changes[(tenant, category)] if x <= ts)

    def request(self, ts: float, pop: str, session: str, tenant: str, path: str, agent: str) -> bool:
        """One request through the edge; whether it was served another tenant's catalog."""
        rng = self.rng
        req = "e" + _hex(rng, 64)
        kind = "asset" if path.startswith("/static/") else "catalog" if "/catalog/" in path else \
            "search" if path.startswith("/api/v2/search") else "private"
        if kind == "private":  # account, cart, checkout: never cached
            self.kinds.setdefault("bypassed_route", set()).add(session)
            self._fetch(ts, pop, req, session, tenant, path, "BYPASS", agent, kind)
            return False
        if kind == "search" and rng.random() < 0.09:  # the edge's rate limiter refuses a burst of searches itself
            self.kinds.setdefault("search_throttled_at_edge", set()).add(session)
            self.edge.append(edge_line(ts, pop, req, session, tenant, path, 429, "DENIED", 120, "-",
                                       rng.randint(0, 3), agent))
            return False
        if kind == "asset" or (kind == "catalog" and ts < self.fixed_at):  # the bug: catalog keyed without tenant
            key = (pop, path)
        else:
            key = (pop, path, tenant)
        entry = self.cache.get(key)
        if entry is not None and ts < entry[2] + STALE_GRACE_S:
            tag, owner, expires, size = entry
            cache = "HIT" if ts < expires else "STALE"
            if kind == "asset" and owner != tenant:
                self.kinds.setdefault("public_asset_shared", set()).add(session)
            if kind == "catalog" and owner == tenant:
                cat = path.rsplit("/", 1)[1].split("?")[0]
                if cache == "STALE" or tag != etag(tenant, path, self.version(tenant, cat, ts)):
                    self.kinds.setdefault("stale_own_catalog", set()).add(session)
            self.edge.append(edge_line(ts, pop, req, session, tenant, path, 200, cache, size, tag,
                                       rng.randint(1, 9), agent))
            if cache == "STALE":  # revalidated in the background: the entry is refreshed for this request's tenant
                self._fetch(ts + 0.05, pop, "r" + req[1:], session, tenant, path, None, agent, kind, key)
            return kind == "catalog" and owner != tenant
        self._fetch(ts, pop, req, session, tenant, path, "MISS", agent, kind, key)
        return False

    def _fetch(self, ts, pop, req, session, tenant, path, cache, agent, kind, key=None):
        rng = self.rng
        node, ms = rng.choice(NODES), rng.randint(20, 700)
        u = rng.random()
        status = 200 if u < 0.97 else 503 if u < 0.99 else 504
        if kind == "asset":
            tag, scope, age = etag(path, "v12"), "public", int(TTL["asset"])
        elif kind == "catalog":
            cat = path.rsplit("/", 1)[1].split("?")[0]
            tag, scope, age = etag(tenant, path, self.version(tenant, cat, ts)), "tenant", int(TTL["catalog"])
        else:
            tag, scope, age = etag(tenant, path, ts // 600), "tenant", int(TTL.get(kind, 0))
        if status == 504:
            ms = 10000
        size = rng.randint(900, 160000) if status == 200 else 120
        if status != 200:
            self.kinds.setdefault("origin_error", set()).add(session)
        self.origin.append(origin_line(ts + ms / 1000, node, req, tenant, path, status,
                                       tag if status == 200 else None, scope, age, ms))
        if cache is not None:
            self.edge.append(edge_line(ts + ms / 1000, pop, req, session, tenant, path, status if status == 200 else
                                       502, cache, size, tag if status == 200 else "-", ms + rng.randint(1, 9), agent))
        if key is not None and status == 200 and age:
            self.cache[key] = (tag, tenant, ts + age, size)


def session_paths(rng: random.Random) -> list[str]:
    """The paths one browsing session asks for, in order."""
    out = list(rng.sample(ASSETS, rng.randint(1, 4)))
    seen = []
    for _ in range(rng.randint(3, 14)):
        r = rng.random()
        if r < 0.2:
            page = rng.choice(seen) if seen and rng.random() < 0.5 else "%s?page=%d" % (
                rng.choice(CATEGORIES), rng.choice((1, 1, 1, 2, 2, 3, 4)))
            seen.append(page)
            out.append("/api/v2/catalog/" + page)
        elif r < 0.45:
            out.append("/api/v2/search?q=" + rng.choice(CATEGORIES)[:3])
        else:
            out.append(rng.choice(("/api/v2/account", "/api/v2/cart", "/api/v2/cart/items", "/api/v2/checkout")))
    return out


def write_folder(folder: str, week: Week):
    """Write both sources in the production layout under folder."""
    os.makedirs(os.path.join(folder, "edge"), exist_ok=True)
    os.makedirs(os.path.join(folder, "origin"), exist_ok=True)
    files = {}
    for pop, ts, line in week.edge:
        hour = int((ts - START) // 3600)
        files.setdefault(("edge", "%s-d%d-h%02d.log" % (pop, hour // 24, hour % 24)), []).append((ts, line))
    for o in week.origin:
        name = "%s-d%d.jsonl" % (o["node"], (o["ts"] - START) // 86400)
        files.setdefault(("origin", name), []).append((o["ts"], json.dumps(o, separators=(",", ":"))))
    for (sub, name), lines in files.items():
        lines.sort()
        with open(os.path.join(folder, sub, name), "w") as f:
            f.writelines(line + "\n" for _, line in lines)


def write_logs(folder: str, seed: int = 3, count: int = 10000, fixed_at_frac: float | None = None,
               kinds: dict | None = None) -> dict:
    """Write a week of logs under folder/{edge,origin}; {session id: served another tenant's catalog}. kinds: filled
    with the harmless anomaly kinds drawn (module docstring)."""
    rng = random.Random(seed)
    fixed_at = START + WEEK_S * (fixed_at_frac if fixed_at_frac is not None else rng.uniform(0.15, 0.25))
    tenants = ["t-" + _hex(rng, 24) for _ in range(80)]
    week = Week(rng, tenants, fixed_at)
    requests, labels = [], {}
    for _ in range(count):
        session, tenant = "s" + _hex(rng, 40), rng.choice(tenants)
        pop, agent, t = rng.choice(POPS), rng.choice(AGENTS), START + rng.uniform(0, WEEK_S - 3600)
        labels[session] = False
        for path in session_paths(rng):
            if rng.random() < 0.03:  # the client's network moved it to another point of presence
                pop = rng.choice(POPS)
                week.kinds.setdefault("two_points_of_presence", set()).add(session)
            requests.append((t, pop, session, tenant, path, agent))
            t += rng.uniform(0.5, 40.0)
    for t, pop, session, tenant, path, agent in sorted(requests):
        if week.request(t, pop, session, tenant, path, agent):
            labels[session] = True
    write_folder(folder, week)
    if kinds is not None:
        kinds.update({name: len(sessions) for name, sessions in week.kinds.items()})
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
