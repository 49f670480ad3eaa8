"""The weekly cache report: answers, hit rate, SERVFAILs and stale answers per node (repeated lines once)."""

import collections
import sys

from dnsops import logs


def by_node(log_dir):
    """{node: {"answers", "hit_rate", "servfail", "stale", "fetch_failures"}}."""
    seen, out = set(), collections.defaultdict(collections.Counter)
    for a in logs.iter_answers(log_dir):
        if a in seen:
            continue
        seen.add(a)
        out[a.node]["answers"] += 1
        out[a.node][a.how] += 1
    failures = collections.Counter(x["node"] for x in logs.iter_fetches(log_dir) if not x["ok"])
    return {n: {"answers": c["answers"], "hit_rate": round(c["hit"] / max(1, c["answers"]), 4),
                "servfail": c["fail"], "stale": c["stale"], "fetch_failures": failures[n]}
            for n, c in sorted(out.items())}


def main(argv):
    for node, row in by_node(argv[0] if argv else "logs").items():
        print("%-4s %8d answers  hit rate %.4f  %5d SERVFAIL  %5d stale  %5d failed fetches"
              % (node, row["answers"], row["hit_rate"], row["servfail"], row["stale"], row["fetch_failures"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
