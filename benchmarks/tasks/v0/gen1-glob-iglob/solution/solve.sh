#!/usr/bin/env bash
# Put the original definition of iglob back where it was deleted (after line 30).
set -euo pipefail
python3 - "$(dirname "$0")/iglob.py.txt" <<'PY'
import sys
path = "vendored/glob.py"
lines = open(path).read().splitlines(keepends=True)
lines[30:30] = open(sys.argv[1]).read().splitlines(keepends=True)
open(path, "w").write("".join(lines))
PY
