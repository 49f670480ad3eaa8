#!/usr/bin/env bash
# Put the original definition of quote back where it was deleted (after line 324).
set -euo pipefail
python3 - "$(dirname "$0")/quote.py.txt" <<'PY'
import sys
path = "vendored/shlex.py"
lines = open(path).read().splitlines(keepends=True)
lines[324:324] = open(sys.argv[1]).read().splitlines(keepends=True)
open(path, "w").write("".join(lines))
PY
