#!/usr/bin/env bash
# Put the original definition of v6_int_to_packed back where it was deleted (after line 139).
set -euo pipefail
python3 - "$(dirname "$0")/v6_int_to_packed.py.txt" <<'PY'
import sys
path = "vendored/ipaddress.py"
lines = open(path).read().splitlines(keepends=True)
lines[139:139] = open(sys.argv[1]).read().splitlines(keepends=True)
open(path, "w").write("".join(lines))
PY
