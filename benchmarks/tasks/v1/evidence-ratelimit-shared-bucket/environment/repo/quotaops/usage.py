"""Per-key usage: requests, refusals by reason and the busiest calendar minute (what account managers receive)."""

import sys

from quotaops import sources


def usage(log_dir):
    """{API key: {"requests", "refused_rate_limit", "refused_overload", "busiest_minute"}}."""
    out, minutes = {}, {}
    for g in sources.requests(log_dir).values():
        row = out.setdefault(g["key"], {"requests": 0, "refused_rate_limit": 0, "refused_overload": 0})
        row["requests"] += 1
        if g["status"] == 429:
            row["refused_" + g["reason"]] += 1
        minute = (g["key"], int(g["ts"] // 60))
        minutes[minute] = minutes.get(minute, 0) + 1
    for (key, _), n in minutes.items():
        out[key]["busiest_minute"] = max(out[key].get("busiest_minute", 0), n)
    return out


if __name__ == "__main__":
    for key, row in sorted(usage(sys.argv[1]).items()):
        print(key, " ".join("%s=%d" % kv for kv in sorted(row.items())))
