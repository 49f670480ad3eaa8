#!/usr/bin/env bash
# Split on the first '=' only.
set -euo pipefail
python3 - <<'PY'
p = "app/config.py"
s = open(p).read()
s = s.replace('        parts = line.split("=")\n', '        parts = line.split("=", 1)\n')
open(p, "w").write(s)
PY
