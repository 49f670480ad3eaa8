#!/usr/bin/env bash
# Put the original definition of capwords back where it was deleted (after line 36).
set -euo pipefail
python3 - "$(dirname "$0")/capwords.py.txt" <<'PY'
import sys
path = "vendored/string.py"
lines = open(path).read().splitlines(keepends=True)
lines[36:36] = open(sys.argv[1]).read().splitlines(keepends=True)
open(path, "w").write("".join(lines))
PY
