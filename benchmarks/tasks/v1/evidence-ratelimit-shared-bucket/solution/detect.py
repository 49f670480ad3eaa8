"""API keys refused by the rate limiter while under their own limit.

The limiter admits at most the key's plan limit per calendar minute (the plan in force at that moment: plans
change during the week) and counts every request it let through, whatever the upstream answered. A `429` with
reason `rate_limit` is right when the key itself had already been admitted its limit in that minute; refused
with fewer, the key paid for someone else's traffic. Load shedding (`overload`) is not the limiter's; log lines
can repeat (one request id).
"""

import json
import os


def _limit_at(plan, ts):
    return [p["limit"] for p in sorted(plan, key=lambda p: p["from"]) if p["from"] <= ts][-1]


def refused_under_limit(log_dir):
    """The API keys refused at least once (rate_limit) before reaching their own per-minute limit."""
    with open(os.path.join(log_dir, "plans", "plans.json")) as f:
        plans = json.load(f)
    lines = {}
    folder = os.path.join(log_dir, "gateway")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                g = json.loads(line)
                lines[g["req"]] = g
    admitted, out = {}, set()
    for g in sorted(lines.values(), key=lambda g: g["ts"]):
        minute = (g["key"], int(g["ts"] // 60))
        if g["status"] != 429:
            admitted[minute] = admitted.get(minute, 0) + 1
        elif g["reason"] == "rate_limit" and admitted.get(minute, 0) < _limit_at(plans[g["key"]], g["ts"]):
            out.add(g["key"])
    return sorted(out)
