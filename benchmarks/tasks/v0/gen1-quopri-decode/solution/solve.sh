#!/usr/bin/env bash
# Put the original definition of decode back where it was deleted (after line 116).
set -euo pipefail
python3 - "$(dirname "$0")/decode.py.txt" <<'PY'
import sys
path = "vendored/quopri.py"
lines = open(path).read().splitlines(keepends=True)
lines[116:116] = open(sys.argv[1]).read().splitlines(keepends=True)
open(path, "w").write("".join(lines))
PY
