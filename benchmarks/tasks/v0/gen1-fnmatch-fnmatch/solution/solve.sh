#!/usr/bin/env bash
# Put the original definition of fnmatch back where it was deleted (after line 18).
set -euo pipefail
python3 - "$(dirname "$0")/fnmatch.py.txt" <<'PY'
import sys
path = "vendored/fnmatch.py"
lines = open(path).read().splitlines(keepends=True)
lines[18:18] = open(sys.argv[1]).read().splitlines(keepends=True)
open(path, "w").write("".join(lines))
PY
