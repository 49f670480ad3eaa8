#!/usr/bin/env bash
# The fix: the sort key follows Version.compare (a prerelease before its release, numeric identifiers as numbers,
# numbers before words, a longer identifier list after its prefix); tests and a changelog fragment.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/fix.patch"
