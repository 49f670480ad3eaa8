"""Sessions revoked because one install refreshed twice at once and the two requests reached different auth nodes.

A refresh rotates the session's token (`refresh fam=F gen=G->G+1`). Using generation G again is a reuse: within
the 10-second grace and from the install that rotated it (the gateway's `dev` of both requests) it must be
granted; an auth node that did not know the rotation revoked the session instead. Revocations for other reuses
(an old generation, another install, an install already logged out by a migration) are the theft protection
working. Repeated gateway lines are one request.
"""

import datetime
import json
import os

GRACE_S = 10.0


def _seconds(stamp):
    return datetime.datetime.fromisoformat(stamp).timestamp()


def _devices(log_dir):
    """{request id: device id} from the gateway."""
    out = {}
    folder = os.path.join(log_dir, "gateway")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                g = json.loads(line)
                out[g["req"]] = g["dev"]
    return out


def _auth(log_dir):
    """(rotations {(fam, gen): (ts, req)}, revokes [(ts, fam, gen, req)], logged out {fam: ts})."""
    rotations, revokes, logged_out = {}, [], {}
    folder = os.path.join(log_dir, "auth")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                p = line.split()
                kv = dict(x.split("=", 1) for x in p[3:] if "=" in x)
                if p[2] == "refresh":
                    gen = int(kv["gen"].split("->")[0])
                    rotations[(kv["fam"], gen)] = (_seconds(p[0]), kv["req"])
                elif p[2] == "reuse" and kv.get("action") == "revoke":
                    revokes.append((_seconds(p[0]), kv["fam"], int(kv["gen"]), kv["req"]))
                elif p[2] == "logout":
                    logged_out[kv["fam"]] = _seconds(p[0])
    return rotations, revokes, logged_out


def wrongly_revoked_sessions(log_dir):
    """The ids of the sessions revoked for a reuse the grace should have covered."""
    devices = _devices(log_dir)
    rotations, revokes, logged_out = _auth(log_dir)
    hurt = set()
    for ts, fam, gen, req in revokes:
        if fam in logged_out and logged_out[fam] <= ts:
            continue
        rotation = rotations.get((fam, gen))
        if rotation is None or ts - rotation[0] > GRACE_S:
            continue
        dev = devices.get(req)
        if dev is not None and dev == devices.get(rotation[1]):
            hurt.add(fam)
    return sorted(hurt)
