#!/usr/bin/env bash
# Put the original definition of filter back where it was deleted (after line 47).
set -euo pipefail
python3 - "$(dirname "$0")/filter.py.txt" <<'PY'
import sys
path = "vendored/fnmatch.py"
lines = open(path).read().splitlines(keepends=True)
lines[47:47] = open(sys.argv[1]).read().splitlines(keepends=True)
open(path, "w").write("".join(lines))
PY
