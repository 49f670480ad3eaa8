#!/usr/bin/env bash
# Put the original definition of b16encode back where it was deleted (after line 271).
set -euo pipefail
python3 - "$(dirname "$0")/b16encode.py.txt" <<'PY'
import sys
path = "vendored/base64.py"
lines = open(path).read().splitlines(keepends=True)
lines[271:271] = open(sys.argv[1]).read().splitlines(keepends=True)
open(path, "w").write("".join(lines))
PY
