#!/usr/bin/env bash
# The fix: Table.restore resets the table's next-ID counter (as truncate does), so documents inserted after a
# restore follow the restored IDs (the feature kept the counter from before the restore); the ID types were never
# the cause. A regression test inserting after restores of larger, smaller and sparse snapshots.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/fix.patch"
