"""The weekly utilisation report: jobs, preemptions and checkpoint storage per day."""

import sys

from trainops import sources

DAY_S = 86400


def daily(log_dir, start):
    """{day: {"submitted", "preempted", "finished", "checkpoint_gb"}}."""
    out = {}

    def day(ts):
        return out.setdefault(int((ts - start) // DAY_S), {"submitted": 0, "preempted": 0, "finished": 0,
                                                            "checkpoint_gb": 0.0})

    names = {"submit": "submitted", "preempt": "preempted", "finish": "finished"}
    for e in sources.scheduler_events(log_dir):
        if e["ev"] in names:
            day(e["ts"])[names[e["ev"]]] += 1
    for c in sources.checkpoints(log_dir):
        if c["finished"] is not None:
            day(c["finished"])["checkpoint_gb"] += c["bytes"] / 1e9
    return dict(sorted(out.items()))


if __name__ == "__main__":
    events = sources.scheduler_events(sys.argv[1])
    first = events[0]["ts"] if events else 0.0
    for d, row in daily(sys.argv[1], first - first % DAY_S).items():
        print("d%d" % d, " ".join("%s=%s" % (k, round(v, 1)) for k, v in row.items()))
