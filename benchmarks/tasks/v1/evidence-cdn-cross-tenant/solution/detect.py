"""Sessions that were served another tenant's content.

The origin says which responses are the tenant's own (`scope: tenant`) and which every tenant shares (`public`),
and which entity tag it produced for which tenant and path. An edge cache hit (`HIT`, or `STALE` while
revalidating) of a tenant-scoped path whose entity tag the origin never produced for the session's tenant on that
path carried another tenant's response. An old tag of the session's own tenant is a stale version, not a leak.
"""

import json
import os


def served_other_tenant(log_dir):
    """The ids of the sessions that received a tenant-scoped response produced for another tenant."""
    scope, own = {}, set()
    folder = os.path.join(log_dir, "origin")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                o = json.loads(line)
                if o["status"] == 200:
                    scope[o["path"]] = o["scope"]
                    own.add((o["tenant"], o["path"], o["etag"]))
    out = set()
    folder = os.path.join(log_dir, "edge")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                head, path, tail = line.split('"', 2)[0], line.split('"')[1].split(" ", 1)[1], line.split('"', 2)[2]
                _, _, _, session, tenant = head.split()
                status, cache = tail.split()[:2]
                tag = line.split('"')[3]
                if cache in ("HIT", "STALE") and scope.get(path) == "tenant" and (tenant, path, tag) not in own:
                    out.add(session)
    return sorted(out)
