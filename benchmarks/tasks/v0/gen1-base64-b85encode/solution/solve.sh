#!/usr/bin/env bash
# Put the original definition of b85encode back where it was deleted (after line 446).
set -euo pipefail
python3 - "$(dirname "$0")/b85encode.py.txt" <<'PY'
import sys
path = "vendored/base64.py"
lines = open(path).read().splitlines(keepends=True)
lines[446:446] = open(sys.argv[1]).read().splitlines(keepends=True)
open(path, "w").write("".join(lines))
PY
