"""Word statistics for text files."""

import json
import optparse
import sys

from counting import stats


def build_parser():
    parser = optparse.OptionParser(usage="%prog [options] FILE...", description="Count words, lines and characters.")
    parser.add_option("-t", "--top", type="int", default=0, metavar="N", help="also list the N most common words")
    parser.add_option("-i", "--ignore-case", action="store_true", default=False, help="fold case before counting")
    parser.add_option("-f", "--format", choices=["text", "json"], default="text", help="output format: text or json")
    parser.add_option("-q", "--quiet", action="store_true", dest="quiet", default=False,
                      help="print only the total word count")
    return parser


def main(argv):
    parser = build_parser()
    options, files = parser.parse_args(argv)
    if not files:
        parser.error("no input files")
    if options.top < 0:
        parser.error("--top must be >= 0")
    results = {}
    for path in files:
        with open(path, encoding="utf-8") as f:
            results[path] = stats(f.read(), options.ignore_case)
    total = sum(r["words"] for r in results.values())
    if options.quiet:
        print(total)
    elif options.format == "json":
        out = {p: {k: r[k] for k in ("lines", "words", "chars")} for p, r in results.items()}
        if options.top:
            for p, r in results.items():
                out[p]["top"] = r["freq"].most_common(options.top)
        print(json.dumps(out, sort_keys=True))
    else:
        for p, r in results.items():
            print(f"{r['lines']:>6} {r['words']:>6} {r['chars']:>6} {p}")
            for word, n in r["freq"].most_common(options.top):
                print(f"       {n:>6} {word}")
        if len(results) > 1:
            print(f"{'':>6} {total:>6} {'':>6} total")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
