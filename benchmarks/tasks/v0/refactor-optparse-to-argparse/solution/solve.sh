#!/usr/bin/env bash
set -euo pipefail
python3 - <<'PY'
p = "wordstat.py"
s = open(p).read()
s = s.replace("import optparse\n", "import argparse\n")
start, end = s.index("def build_parser():"), s.index("def main(argv):")
s = s[:start] + '''def _non_negative(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("--top must be >= 0")
    return value


def build_parser():
    parser = argparse.ArgumentParser(usage="%(prog)s [options] FILE...", description="Count words, lines and characters.")
    parser.add_argument("-t", "--top", type=_non_negative, default=0, metavar="N", help="also list the N most common words")
    parser.add_argument("-i", "--ignore-case", action="store_true", default=False, help="fold case before counting")
    parser.add_argument("-f", "--format", choices=["text", "json"], default="text", help="output format: text or json")
    parser.add_argument("-q", "--quiet", action="store_true", dest="quiet", default=False,
                        help="print only the total word count")
    parser.add_argument("files", nargs="*", metavar="FILE", help="input files")
    return parser


''' + s[end:]
s = s.replace('''    options, files = parser.parse_args(argv)
    if not files:
        parser.error("no input files")
    if options.top < 0:
        parser.error("--top must be >= 0")
''', '''    options = parser.parse_args(argv)
    files = options.files
    if not files:
        parser.error("no input files")
''')
open(p, "w").write(s)
PY
