#!/usr/bin/env bash
# Finishes the exclusive options the history's last commit started: ExclusiveOptionsError (exported, in the API
# docs), the check after parsing (command-line order, only command-line values, skipped when parsing resiliently),
# creation-time TypeError for names that are not other options, the help text, completion and the info dict; tests.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/fix.patch"
