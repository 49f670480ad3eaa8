"""A tiny export folder in the production layout, for the tests."""

import datetime
import json
import os
import tempfile

T0 = 1_703_462_400.0  # 2023-12-25T00:00:00Z


def iso(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(timespec="microseconds")


def build():
    """fam_a: signed in, refreshed twice (one grace), then a stolen generation 1 revoked it from another address;
    fam_b: logged out; fam_c: expired. One gateway line shipped twice."""
    d = tempfile.mkdtemp(prefix="authops-")
    for sub in ("gateway", "auth", "sessions"):
        os.makedirs(os.path.join(d, sub))
    reqs = [("r1", 10, "/oauth/token", 200, "a1", "dev_1", "10.0.0.1"),
            ("r2", 1000, "/oauth/token", 200, "a2", "dev_1", "10.0.0.1"),
            ("r3", 1000.3, "/oauth/token", 200, "a2", "dev_1", "10.0.0.1"),
            ("r4", 2000, "/oauth/token", 200, "a3", "dev_1", "10.0.0.1"),
            ("r5", 9000, "/oauth/token", 401, "a1", "dev_9", "203.0.113.7"),
            ("r6", 50, "/v1/feed", 200, "api-1", "dev_2", "10.0.0.2"),
            ("r7", 60, "/oauth/revoke", 200, "a3", "dev_2", "10.0.0.2"),
            ("r8", 70, "/v1/feed", 503, "api-2", "dev_2", "10.0.0.2")]
    lines = [json.dumps({"ts": T0 + t, "req": r, "method": "GET" if p.startswith("/v1") else "POST", "path": p,
                         "status": s, "upstream": u, "dev": dev, "ip": ip, "ua": "Acme/8.14.0", "ms": 20 + k,
                         "bytes": 400}) + "\n" for k, (r, t, p, s, u, dev, ip) in enumerate(reqs)]
    with open(os.path.join(d, "gateway", "gw-d0-h00.jsonl"), "w") as f:
        f.writelines(lines + lines[:1])
    auth = [(10.01, "a1", "login fam=fam_a user=u_1 req=r1 method=password"),
            (1000.02, "a2", "refresh fam=fam_a gen=1->2 req=r2"),
            (1000.31, "a2", "reuse fam=fam_a gen=1 req=r3 action=grace"),
            (2000.02, "a3", "refresh fam=fam_a gen=2->3 req=r4"),
            (9000.01, "a1", "reuse fam=fam_a gen=1 req=r5 action=revoke"),
            (60.01, "a3", "logout fam=fam_b reason=user"),
            (80.0, "a1", "expire fam=fam_c")]
    for node in ("a1", "a2", "a3"):
        with open(os.path.join(d, "auth", "%s-d0-h00.log" % node), "w") as f:
            f.writelines("%s %s %s\n" % (iso(T0 + t), n, text) for t, n, text in auth if n == node)
    with open(os.path.join(d, "sessions", "ended-d0.csv"), "w") as f:
        f.write("fam,user,created,ended,reason\n")
        f.write("fam_c,u_3,%.3f,%.3f,expired\n" % (T0 + 80 - 30 * 86400, T0 + 80))
        f.write("fam_b,u_2,%.3f,%.3f,user\n" % (T0 - 86400, T0 + 60.01))
        f.write("fam_a,u_1,%.3f,%.3f,revoked_reuse\n" % (T0 + 10.01, T0 + 9000.01))
    return d
