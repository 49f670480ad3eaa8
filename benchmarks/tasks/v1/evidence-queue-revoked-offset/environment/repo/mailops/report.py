"""The daily delivery report: confirmations accepted by the broker, sent, failed attempts and dead-lettered."""

import sys

from mailops import sources


def daily(log_dir):
    """{day: {"accepted", "sent", "failed_attempts", "dead_lettered"}}; day is the file's `dN`."""
    out = {}

    def day(key):
        return out.setdefault(key, {"accepted": 0, "sent": 0, "failed_attempts": 0, "dead_lettered": 0})

    for p in sources.producer_records(log_dir):
        if p["status"] == "acked":
            day(p["ts"] // 86400)["accepted"] += 1
    for e in sources.consumer_events(log_dir, ("sent", "failed")):
        key = e["time"][:10]
        day(key)["sent" if e["event"] == "sent" else "failed_attempts"] += 1
    for b in sources.broker_events(log_dir):
        if b["ev"] == "dead_letter":
            day(b["ts"] // 86400)["dead_lettered"] += 1
    return out


if __name__ == "__main__":
    totals = {}
    for counts in daily(sys.argv[1]).values():
        for k, v in counts.items():
            totals[k] = totals.get(k, 0) + v
    print(" ".join("%s=%d" % kv for kv in sorted(totals.items())))
