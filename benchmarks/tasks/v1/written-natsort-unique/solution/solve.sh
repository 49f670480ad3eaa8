#!/usr/bin/env bash
# The fix: natsort_unique keeps the first entry of each group that sorts as equal, as given (the feature chose the
# string-smallest spelling through a PRESORT sort); regression tests for spelling, case, keys and the CLI.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/fix.patch"
