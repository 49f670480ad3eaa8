"""Per-user view: sessions, installs and sign-ins over the week (for tickets and the abuse team)."""

import collections

from authops import feeds

MANY_INSTALLS = 5


def summary(log_dir):
    """{user: {"sessions", "logins", "installs", "ended": Counter of reasons}}."""
    reqs = feeds.requests(log_dir, paths={"/oauth/token"})
    fam_user, out = {}, {}
    for e in feeds.iter_auth(log_dir):
        if e.verb == "login":
            fam_user[e.fields["fam"]] = e.fields["user"]
            row = out.setdefault(e.fields["user"], {"sessions": set(), "logins": 0, "installs": set(),
                                                    "ended": collections.Counter()})
            row["logins"] += 1
            row["sessions"].add(e.fields["fam"])
            dev = reqs.get(e.fields.get("req"), {}).get("dev")
            if dev:
                row["installs"].add(dev)
    for r in feeds.iter_ended(log_dir):
        row = out.setdefault(r["user"], {"sessions": set(), "logins": 0, "installs": set(),
                                         "ended": collections.Counter()})
        row["sessions"].add(r["fam"])
        row["ended"][r["reason"]] += 1
    return {u: {"sessions": len(r["sessions"]), "logins": r["logins"], "installs": len(r["installs"]),
                "ended": dict(r["ended"])} for u, r in sorted(out.items())}


def many_installs(table, threshold=MANY_INSTALLS):
    """Users who signed in from at least threshold installs this week."""
    return sorted(u for u, r in table.items() if r["installs"] >= threshold)


def signed_in_again(log_dir, within=3600):
    """[(user, ended fam, reason, seconds to the next login)] of sessions ended by the server and followed by a
    sign-in of the same user within `within` seconds."""
    ended = [r for r in feeds.iter_ended(log_dir) if r["reason"] != "user"]
    logins = collections.defaultdict(list)
    for e in feeds.iter_auth(log_dir):
        if e.verb == "login":
            logins[e.fields["user"]].append(e.ts)
    out = []
    for r in ended:
        after = [t - r["ended"] for t in logins.get(r["user"], []) if 0 <= t - r["ended"] <= within]
        if after:
            out.append((r["user"], r["fam"], r["reason"], min(after)))
    return sorted(out)
