"""python -m hookops report|health|replay-plan|verify (README.md)."""

import argparse
import sys

from hookops import endpoints, replay, report, signing, tenants, timeline
from hookops.timefmt import format_iso


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m hookops")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("report", help="deliveries, outcomes and latency per day")
    r.add_argument("log_dir")
    h = sub.add_parser("health", help="endpoints by failure share, with the disable policy's verdict")
    h.add_argument("log_dir")
    h.add_argument("--top", type=int, default=20)
    rp = sub.add_parser("replay-plan", help="dead letters of an endpoint to redeliver")
    rp.add_argument("log_dir")
    rp.add_argument("endpoint")
    rp.add_argument("--limit", type=int)
    v = sub.add_parser("verify", help="check a request's signature")
    v.add_argument("secret")
    v.add_argument("body_file")
    v.add_argument("header")
    v.add_argument("--now", type=float)
    tl = sub.add_parser("timeline", help="a delivery's journal states and attempts")
    tl.add_argument("log_dir")
    tl.add_argument("delivery")
    tn = sub.add_parser("tenants", help="deliveries, dead letters and the SLA per tenant")
    tn.add_argument("log_dir")
    tn.add_argument("--worst", type=int, default=0, help="only the N tenants with the lowest SLA")
    args = p.parse_args(argv)
    if args.cmd == "timeline":
        print(timeline.render(timeline.of_delivery(args.log_dir, args.delivery)))
        return 0
    if args.cmd == "tenants":
        table = tenants.summary(args.log_dir)
        rows = tenants.worst(table, args.worst) if args.worst else sorted(table.items())
        for tenant, r in rows:
            print("%-24s %6d deliveries  %5d dead  %5d failed  SLA %s" % (
                tenant, r["deliveries"], r.get("dead", 0), r.get("failed", 0),
                "-" if r["sla"] is None else "%.1f%%" % (100 * r["sla"])))
        return 0
    if args.cmd == "report":
        print(report.render(report.by_day(args.log_dir, report.week_start(args.log_dir))))
    elif args.cmd == "health":
        now = report.week_start(args.log_dir) + 7 * 86400
        for ep, share, verdict, row in endpoints.ranked(args.log_dir, now)[:args.top]:
            print("%-8s %5.1f%% failed of %5d  %-7s %s" % (ep, 100 * share, row["attempts"], verdict, row["url"]))
    elif args.cmd == "replay-plan":
        for at, delivery, event in replay.plan(args.log_dir, args.endpoint, args.limit):
            print(format_iso(at), delivery, event)
    else:
        with open(args.body_file, "rb") as f:
            body = f.read()
        try:
            t = signing.verify(args.secret, body, args.header, now=args.now)
        except signing.SignatureError as e:
            print("invalid:", e)
            return 1
        print("valid, signed at", format_iso(t))
    return 0


if __name__ == "__main__":
    sys.exit(main())
