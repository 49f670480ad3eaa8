#!/usr/bin/env bash
# The fix: running_median drops the window's oldest item before deque.append evicts it (reading window[0] after the
# append removed the next-oldest from the sorted copy, so an evicted value stayed in the median for ever); a test that
# every value is the median of exactly the last maxlen items.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/fix.patch"
