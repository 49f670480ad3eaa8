"""python -m searchops report|reindexes|backlog|stale|timeline|queries (README.md)."""

import argparse
import sys

from searchops import lag, queries, reindex, report, stale, timeline


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m searchops")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("report", "reindexes", "backlog"):
        sub.add_parser(name).add_argument("log_dir")
    s = sub.add_parser("stale")
    s.add_argument("log_dir")
    s.add_argument("--min", type=float, default=2.0, help="seconds an answer must be behind the table")
    tl = sub.add_parser("timeline")
    tl.add_argument("log_dir")
    tl.add_argument("doc")
    sub.add_parser("queries").add_argument("log_dir")
    args = p.parse_args(argv)
    if args.cmd == "timeline":
        print(timeline.render(timeline.of_product(args.log_dir, args.doc)))
        return 0
    if args.cmd == "queries":
        for q, n in queries.top_queries(args.log_dir, 20):
            print("%6d  %s" % (n, q))
        return 0
    if args.cmd == "report":
        print(report.render(report.by_day(args.log_dir, report.week_start(args.log_dir))))
    elif args.cmd == "reindexes":
        for r in reindex.runs(args.log_dir):
            ppm = reindex.pages_per_minute(r)
            print("%.0f %s from %s: %d pages, %s%s" % (
                r.start, r.index, r.source, len(r.pages), r.outcome,
                "" if r.duration is None else " after %.0f min (%.1f pages/min)" % (r.duration / 60, ppm)))
    elif args.cmd == "backlog":
        for first, last, worst in lag.backlog_spans(args.log_dir):
            print("%.0f .. %.0f  worst lag %.0f s" % (first, last, worst))
    else:
        for doc, (n, worst) in sorted(stale.by_doc(stale.stale_answers(args.log_dir, args.min)).items()):
            print("%s  %d stale answers, up to %.0f s behind" % (doc, n, worst))
    return 0


if __name__ == "__main__":
    sys.exit(main())
