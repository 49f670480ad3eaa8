"""python -m authops report|traffic|session|review (README.md)."""

import argparse
import sys

from authops import feeds, report, review, sessions, traffic


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m authops")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("report", "traffic", "review"):
        sub.add_parser(name).add_argument("log_dir")
    s = sub.add_parser("session")
    s.add_argument("log_dir")
    s.add_argument("fam")
    args = p.parse_args(argv)
    if args.cmd == "report":
        print(report.render(report.by_day(args.log_dir, report.week_start(args.log_dir))))
    elif args.cmd == "traffic":
        for (method, path), row in traffic.by_route(feeds.iter_gateway(args.log_dir)).items():
            print("%-6s %-22s %8d requests  %5d 5xx  %5d 4xx  p50 %s ms  p99 %s ms" % (
                method, path, row["requests"], row["errors"], row["client_errors"], row["p50_ms"], row["p99_ms"]))
    elif args.cmd == "session":
        for ts, node, verb, fields, dev, ip in sessions.timeline(args.log_dir, args.fam):
            extra = " ".join("%s=%s" % (k, v) for k, v in sorted(fields.items()) if k != "fam")
            print("%.3f %s %-8s %s  dev=%s ip=%s" % (ts, node, verb, extra, dev, ip))
    else:
        for r in review.revocations(args.log_dir):
            print("%.3f %s gen=%s %s from %s%s" % (r["ts"], r["fam"], r["gen"], r["node"], r["ip"],
                                                   " (new address)" if r["new_address"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
