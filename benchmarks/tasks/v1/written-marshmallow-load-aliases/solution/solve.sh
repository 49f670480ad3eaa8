#!/usr/bin/env bash
# The fix: a field's aliases are keys of that field (never unknown, not copied by INCLUDE), its own key wins over
# them (then declared order), errors stay under its own key, and aliases colliding with another loaded field's keys
# are refused when the schema is built; the output side was never wrong. Tests and a changelog entry.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/fix.patch"
