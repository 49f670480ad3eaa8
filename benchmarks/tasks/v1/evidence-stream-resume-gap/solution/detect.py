"""Requests whose streamed answer lost bytes after a reconnect.

A reconnecting client sends the byte offset it holds (the gateway's `resume_from` for that connection); the worker
logs the offset it restarted from (its `resume` event for the same connection). The worker restarting *after* the
offset the client asked for means the bytes in between were never sent: the client lost them. Restarting before
it (an overlap) is harmless: the client drops what it already has. Gateway lines may repeat, come from any
gateway host and hour, and a request may reconnect more than once; each connection is judged on its own.
"""

import json
import os


def _gateway_asks(log_dir):
    """{(request id, connection): resume_from} for every reconnect the gateways saw."""
    asks = {}
    folder = os.path.join(log_dir, "gateway")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                g = json.loads(line)
                if g.get("resume_from") is not None:
                    asks[(g["req"], g["conn"])] = g["resume_from"]
    return asks


def _worker_restarts(log_dir):
    """{(request id, connection): offset the worker restarted from}."""
    out = {}
    folder = os.path.join(log_dir, "worker")
    for name in os.listdir(folder):
        rid = name[:-len(".jsonl")]
        with open(os.path.join(folder, name)) as f:
            for line in f:
                if '"resume"' in line:
                    e = json.loads(line)
                    if e.get("ev") == "resume":
                        out[(rid, e["conn"])] = e["off"]
    return out


def affected(log_dir):
    """The ids of the requests that lost part of their answer."""
    asks, restarts = _gateway_asks(log_dir), _worker_restarts(log_dir)
    return sorted({rid for (rid, conn), off in restarts.items() if (rid, conn) in asks and off > asks[(rid, conn)]})
