#!/usr/bin/env bash
# Put the original definition of fill back where it was deleted (after line 385).
set -euo pipefail
python3 - "$(dirname "$0")/fill.py.txt" <<'PY'
import sys
path = "vendored/textwrap.py"
lines = open(path).read().splitlines(keepends=True)
lines[385:385] = open(sys.argv[1]).read().splitlines(keepends=True)
open(path, "w").write("".join(lines))
PY
