"""The weekly export report: exports started, finished and abandoned per tenant, 503s and pages."""

import collections
import sys

from syncops import api


def by_tenant(log_dir):
    """{tenant: {"exports", "finished", "abandoned", "errors", "pages"}}."""
    out = collections.defaultdict(collections.Counter)
    for e in api.exports(log_dir).values():
        row = out[e["tenant"]]
        row["exports"] += 1
        row["finished" if e["finished"] else "abandoned"] += 1
        row["errors"] += e["errors"]
        row["pages"] += e["pages"]
    return {t: dict(c) for t, c in sorted(out.items())}


def main(argv):
    for tenant, row in by_tenant(argv[0] if argv else "logs").items():
        print("%-10s %5d exports  %5d finished  %4d abandoned  %4d 503s  %6d pages"
              % (tenant, row["exports"], row.get("finished", 0), row.get("abandoned", 0), row.get("errors", 0),
                 row.get("pages", 0)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
