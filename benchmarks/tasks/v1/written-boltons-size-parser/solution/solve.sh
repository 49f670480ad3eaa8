#!/usr/bin/env bash
# The fix: parse the number as a Fraction (exact for every unit) and round() it (nearest, halves to even), as the
# parser's docstring promises; tests for rounding and large units.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/fix.patch"
