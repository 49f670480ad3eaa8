#!/usr/bin/env bash
# Put the original definition of IS_CHARACTER_JUNK back where it was deleted (after line 1060).
set -euo pipefail
python3 - "$(dirname "$0")/IS_CHARACTER_JUNK.py.txt" <<'PY'
import sys
path = "vendored/difflib.py"
lines = open(path).read().splitlines(keepends=True)
lines[1060:1060] = open(sys.argv[1]).read().splitlines(keepends=True)
open(path, "w").write("".join(lines))
PY
