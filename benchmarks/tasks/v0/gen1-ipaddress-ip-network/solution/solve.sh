#!/usr/bin/env bash
# Put the original definition of ip_network back where it was deleted (after line 56).
set -euo pipefail
python3 - "$(dirname "$0")/ip_network.py.txt" <<'PY'
import sys
path = "vendored/ipaddress.py"
lines = open(path).read().splitlines(keepends=True)
lines[56:56] = open(sys.argv[1]).read().splitlines(keepends=True)
open(path, "w").write("".join(lines))
PY
