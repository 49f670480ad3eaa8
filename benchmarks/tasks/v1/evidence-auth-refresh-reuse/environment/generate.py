"""A week of an app's API gateway log, its auth nodes' logs and the ended-sessions export, from a seed (stdlib only).

    python generate.py REPO     builds REPO from its pinned oauthlib release and history (sdist_repo.py, a copy of
                                the suite's shared script next to this file: the release the auth service's
                                token endpoint is built on, then the identity team's authops/ tools as a
                                commit), then writes REPO/logs/ (seed 11, 8,000 sessions: ≈ 680 files, ≈ 40 MB)

Three sources, joined by request id, session (token family) and time:
  logs/gateway/gw-dDAY-hHOUR.jsonl     one line per API request: ts, req, method, path, status, upstream (the auth
                                       node for /oauth/token, an API pod otherwise), dev (the app install's device id
                                       header), ip, ua, ms, bytes; shipped at least once, so a line can repeat
  logs/auth/NODE-dDAY-hHOUR.log        the auth nodes: `ISO NODE login fam=F user=U req=R method=M`, `ISO NODE refresh
                                       fam=F gen=G->G+1 req=R`, `ISO NODE reuse fam=F gen=G req=R action=grace|revoke`,
                                       `ISO NODE logout fam=F reason=user|password_change|admin`, `ISO NODE expire
                                       fam=F`
  logs/sessions/ended-dDAY.csv         sessions that ended that day: fam, user, created, ended, reason

The auth service's bug (fixed in production at a point of the week, in no repository): a refresh token used again
shortly after its rotation by the same install (two requests of the app refreshing at once) is meant to get the
rotated token again (grace, 10 s); the grace check looked the rotation up in the node's own cache, so when the two
requests landed on different auth nodes the second was taken for a stolen token and the whole session was revoked.
After the fix the rotation record is shared. A session is hurt when it was revoked that way. Harmless anomalies:
concurrent refreshes granted grace (on one node before the fix, on any after it), sessions revoked for replays of
old tokens (restored backups, stolen tokens) and for the old phone's refresh right after a new phone took the
session over (another install: revoked by design), sessions ended by logout, password change, admins or the 30-day
lifetime, repeated gateway lines.

The verifier's setup.py imports this file (a copy in tests/) to draw fresh weeks with other seeds and fix times;
`write_logs` returns the true labels ({session id: hurt}); given a dict as `kinds`, it also fills in the harmless
anomaly kinds it drew ({kind: sessions of the week}, or (lines, all lines, unit) for repeated lines) for
benchmarks/evidence_stats.py.
"""

from __future__ import annotations

import csv
import datetime
import json
import os
import random
import sys

START = 1_703_462_400  # 2023-12-25T00:00:00Z
WEEK = 7 * 86400
NODES = ("a1", "a2", "a3")
PODS = ("api-7f9c-1", "api-7f9c-2", "api-7f9c-3", "api-7f9c-4", "api-7f9c-5")
LIFETIME = 30 * 86400
ACCESS_S = 900
GRACE_S = 10
SESSION_FIELDS = ("fam", "user", "created", "ended", "reason")
UAS = ("Acme/8.14.0 (iPhone; iOS 17.2; Scale/3.00)", "Acme/8.14.0 (Android 14; Pixel 7)",
       "Acme/8.13.2 (Android 13; SM-A536B)", "Acme/8.14.0 (iPad; iPadOS 17.1)",
       "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/120.0 Safari/537.36 AcmeWeb/2023.12",
       "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 Version/17.2 Safari AcmeWeb/2023.12")
PATHS = (("GET", "/v1/feed"), ("GET", "/v1/me"), ("GET", "/v1/notifications"), ("POST", "/v1/events"),
         ("GET", "/v1/items"), ("PUT", "/v1/settings"), ("GET", "/v1/search"), ("POST", "/v1/uploads"))


def _hex(rng: random.Random, bits: int = 48) -> str:
    return "%0*x" % (bits // 4, rng.getrandbits(bits))


def iso(t: float) -> str:
    """UTC seconds as the auth nodes write them (microsecond ISO 8601, +00:00)."""
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(timespec="microseconds")


def _ip(rng):
    return "%d.%d.%d.%d" % (rng.randrange(1, 224), rng.randrange(256), rng.randrange(256), rng.randrange(1, 255))


class Week:
    """What the week's logs collect."""

    def __init__(self, rng):
        self.rng = rng
        self.gateway, self.auth, self.ended, self.labels = [], [], [], {}
        self.kinds = {}  # harmless anomaly kind -> sessions (the ground truth evidence_stats.py counts)

    def kind(self, name, fam):
        self.kinds.setdefault(name, set()).add(fam)

    def request(self, t, method, path, status, upstream, dev, ip, ua, ms=None):
        req = "req_" + _hex(self.rng, 64)
        ms = ms if ms is not None else int(self.rng.lognormvariate(3.3, 0.6))
        self.gateway.append({"ts": round(t, 3), "req": req, "method": method, "path": path, "status": status,
                             "upstream": upstream, "dev": dev, "ip": ip, "ua": ua, "ms": ms,
                             "bytes": self.rng.randrange(180, 24_000)})
        return req

    def line(self, t, node, text):
        self.auth.append((t, "%s %s %s" % (iso(t), node, text)))


def _session(week, rng, fam, user, dev, ip, ua, created, login_in_week, rate, fixed_at, fate):
    """One token family from its login to its end (or the week's end); (end time, hurt, end reason)."""
    end_of_life = created + LIFETIME
    gen = 1
    rotated = {}  # gen -> (rotation time, node, device)
    if login_in_week:
        node = rng.choice(NODES)
        req = week.request(created, "POST", "/oauth/token", 200, node, dev, ip, ua)
        week.line(created + 0.02, node, "login fam=%s user=%s req=%s method=%s" % (
            fam, user, req, rng.choice(("password", "password", "sso", "magic_link"))))
    t = max(created, START) + rng.expovariate(rate)
    last_refresh = t - rng.uniform(0, 2 * ACCESS_S)
    ends = []
    if fate[0] is not None:
        ends.append(fate)
    if end_of_life < START + WEEK:
        ends.append((end_of_life, "expire"))
    stop = min([e[0] for e in ends] + [START + WEEK])
    while t < stop:
        if t - last_refresh > ACCESS_S:
            node = rng.choice(NODES)
            req = week.request(t, "POST", "/oauth/token", 200, node, dev, ip, ua)
            rt = t + rng.uniform(0.005, 0.05)
            week.line(rt, node, "refresh fam=%s gen=%d->%d req=%s" % (fam, gen, gen + 1, req))
            rotated[gen] = (rt, node, dev)
            gen += 1
            last_refresh = t
            if rng.random() < 0.0075:  # two requests of the app refreshed at once, with the same token
                t2 = t + rng.uniform(0.01, 0.6)
                node2 = rng.choice(NODES)
                req2 = week.request(t2, "POST", "/oauth/token", 200, node2, dev, ip, ua)
                ut = max(t2 + rng.uniform(0.005, 0.05), rt + 0.001)
                if node2 != node and ut < fixed_at:  # the bug: another node's rotation is unknown here
                    week.gateway[-1]["status"] = 401
                    week.line(ut, node2, "reuse fam=%s gen=%d req=%s action=revoke" % (fam, gen - 1, req2))
                    return ut, True, "revoked_reuse"
                week.line(ut, node2, "reuse fam=%s gen=%d req=%s action=grace" % (fam, gen - 1, req2))
                week.kind("concurrent_refresh_grace", fam)
        for _ in range(rng.randint(0, 2)):  # the app's calls while open
            method, path = rng.choice(PATHS)
            t += rng.uniform(0.05, 20)
            week.request(t, method, path, rng.choice((200, 200, 200, 200, 204, 304, 404)), rng.choice(PODS),
                         dev, ip, ua)
        t += rng.expovariate(rate)
    if not ends or min(ends)[0] >= START + WEEK:
        return None, False, None
    when, kind = min(ends)
    node = rng.choice(NODES)
    if kind == "expire":
        week.line(when, node, "expire fam=%s" % fam)
        week.kind("lifetime_expired", fam)
        return when, False, "expired"
    if kind == "replay":  # an old token (rotated long ago) shows up from elsewhere
        if gen <= 2:
            return None, False, None
        old = rng.randrange(1, gen - 1)
        req = week.request(when, "POST", "/oauth/token", 401, node, "dev_" + _hex(rng, 64), _ip(rng),
                           rng.choice(UAS))
        week.line(when + 0.01, node, "reuse fam=%s gen=%d req=%s action=revoke" % (fam, old, req))
        week.kind("revoked_old_token_replay", fam)
        return when + 0.01, False, "revoked_reuse"
    if kind == "migrated":  # the app data moved to a new phone: both installs hold the token
        if gen <= 1:
            return None, False, None
        dev2, ip2 = "dev_" + _hex(rng, 64), _ip(rng)
        req = week.request(when, "POST", "/oauth/token", 200, node, dev2, ip2, ua)
        week.line(when + 0.02, node, "refresh fam=%s gen=%d->%d req=%s" % (fam, gen, gen + 1, req))
        t2 = when + rng.uniform(0.5, 8)  # the old phone refreshes with the same token
        node2 = rng.choice(NODES)
        req = week.request(t2, "POST", "/oauth/token", 401, node2, dev, ip, ua)
        week.line(t2 + 0.01, node2, "reuse fam=%s gen=%d req=%s action=revoke" % (fam, gen, req))
        week.kind("revoked_new_phone", fam)
        return t2 + 0.01, False, "revoked_reuse"
    if kind == "user":
        week.request(when - 0.02, "POST", "/oauth/revoke", 200, node, dev, ip, ua)
    week.line(when, node, "logout fam=%s reason=%s" % (fam, kind))
    week.kind("logout_" + kind, fam)
    return when, False, kind


def write_logs(folder: str, seed: int = 11, count: int = 8_000, fixed_at: float | None = None,
               kinds: dict | None = None) -> dict:
    """Write a week under folder/{gateway,auth,sessions}; {session: revoked for a concurrent refresh on two nodes}.
    fixed_at (UTC seconds): when the auth fix went out; by default on the second day. kinds: filled with the
    harmless anomaly kinds drawn (module docstring)."""
    rng = random.Random(seed)
    if fixed_at is None:
        fixed_at = START + WEEK * rng.uniform(0.15, 0.25)  # rebalanced 2026-12-03 from (0.2, 0.3): issue #24 band
    week = Week(rng)
    users = ["u_" + _hex(rng, 40) for _ in range(max(50, count * 2 // 3))]
    hurt = {}
    queue = []  # (created, user, dev, ip, ua, login in the week)
    for _ in range(count):
        user = rng.choice(users)
        created = START - rng.uniform(0, LIFETIME) if rng.random() < 0.8 else START + rng.uniform(0, WEEK)
        queue.append((created, user, "dev_" + _hex(rng, 64), _ip(rng), rng.choice(UAS), created >= START))
    while queue:
        created, user, dev, ip, ua, in_week = queue.pop()
        fam = "fam_" + _hex(rng, 64)
        rate = rng.lognormvariate(-10.6, 0.8)  # app opens per second (≈ 2 a day at the median)
        x = rng.random()
        fate = (None, None)
        when = START + rng.uniform(0, WEEK)
        if x < 0.1:
            fate = (when, "user")
        elif x < 0.115:
            fate = (when, "password_change")
        elif x < 0.12:
            fate = (when, "admin")
        elif x < 0.17:
            fate = (when, "replay")
        elif x < 0.19:
            fate = (when, "migrated")
        ended, bad, reason = _session(week, rng, fam, user, dev, ip, ua, created, in_week, rate, fixed_at, fate)
        hurt[fam] = bad
        if ended is not None:
            week.ended.append((ended, fam, user, created, reason))
            if reason in ("revoked_reuse", "password_change", "admin") and ended < START + WEEK - 60:
                queue.append((ended + rng.uniform(20, 7200), user, dev, ip, ua, True))  # signs in again
    repeated = {}
    seen = write_folder(folder, week.gateway, week.auth, week.ended, rng, repeated)
    if kinds is not None:
        kinds.update({name: len(fams & seen) for name, fams in week.kinds.items()})
        kinds["repeated_gateway_line"] = (repeated["lines"], repeated["of"], "gateway lines")
    return {f: hurt[f] for f in seen}


def write_folder(folder: str, gateway: list[dict], auth: list[tuple[float, str]], ended: list[tuple],
                 rng: random.Random | None = None, repeated: dict | None = None) -> set:
    """Write gateway requests, (ts, text) auth lines and (ended, fam, user, created, reason) rows in the production
    layout under folder (the week only); the sessions the auth logs name. repeated: filled with the gateway lines
    shipped twice and all gateway lines written ({"lines", "of"})."""
    rng = rng or random.Random(0)
    for sub in ("gateway", "auth", "sessions"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)

    def hour_of(ts):
        h = int((ts - START) // 3600)
        return h if 0 <= h < 168 else None

    by_hour, twice, lines = {}, 0, 0
    for g in gateway:
        h = hour_of(g["ts"])
        if h is not None:
            by_hour.setdefault(h, []).append(g)
    for hour, group in sorted(by_hour.items()):
        group.sort(key=lambda g: g["ts"])
        n = len(group)
        group = [g for g in group for _ in range(2 if rng.random() < 0.03 else 1)]  # at-least-once shipping
        twice, lines = twice + len(group) - n, lines + len(group)
        with open(os.path.join(folder, "gateway", "gw-d%d-h%02d.jsonl" % (hour // 24, hour % 24)), "w") as f:
            f.writelines(json.dumps(g, separators=(",", ":")) + "\n" for g in group)
    if repeated is not None:
        repeated.update(lines=twice, of=lines)
    by_file, seen = {}, set()
    for ts, text in auth:
        h = hour_of(ts)
        if h is not None:
            by_file.setdefault((text.split()[1], h), []).append((ts, text))
            seen.add(text.split("fam=")[1].split()[0])
    for (node, hour), group in sorted(by_file.items()):
        group.sort()
        with open(os.path.join(folder, "auth", "%s-d%d-h%02d.log" % (node, hour // 24, hour % 24)), "w") as f:
            f.writelines(text + "\n" for _, text in group)
    by_day = {}
    for when, fam, user, created, reason in ended:
        day = int((when - START) // 86400)
        if 0 <= day < 7:
            by_day.setdefault(day, []).append({"fam": fam, "user": user, "created": "%.3f" % created,
                                               "ended": "%.3f" % when, "reason": reason})
    for day, rows in sorted(by_day.items()):
        rows.sort(key=lambda r: r["ended"])
        with open(os.path.join(folder, "sessions", "ended-d%d.csv" % day), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=SESSION_FIELDS)
            w.writeheader()
            w.writerows(rows)
    return seen


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
