#!/usr/bin/env bash
# Finishes redact_literals, which the history's last two commits started: the filter (strings with their prefixes,
# numbers with their sign but not a subtraction's minus, LIMIT/OFFSET counts kept, all-literal IN lists collapsed,
# numbering per statement after existing $n), first among the statement filters, the --redact-literals flag, the
# man page, the changelog; the examples' xfail marker removed, more tests.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/fix.patch"
