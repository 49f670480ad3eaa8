"""The security review of reuse revocations (docs/runbook.md): who presented the spent token, from where."""

from authops import feeds, netblocks, sessions


def revocations(log_dir):
    """[{"ts", "fam", "gen", "node", "ip", "ua", "login_ip", "new_address"}] of the week's reuse revocations;
    login_ip is the address of the session's sign-in when it happened this week; new_address: another /24."""
    reqs = feeds.requests(log_dir, paths={"/oauth/token"})
    out = []
    for fam, events in sessions.by_family(log_dir).items():
        login_ip = None
        for e in events:
            g = reqs.get(e.fields.get("req"), {})
            if e.verb == "login":
                login_ip = g.get("ip")
            if e.verb == "reuse" and e.fields.get("action") == "revoke":
                out.append({"ts": e.ts, "fam": fam, "gen": e.fields["gen"], "node": e.node, "ip": g.get("ip"),
                            "ua": g.get("ua"), "login_ip": login_ip,
                            "new_address": login_ip is not None and not netblocks.same_block(g.get("ip"), login_ip)})
    return sorted(out, key=lambda r: r["ts"])
