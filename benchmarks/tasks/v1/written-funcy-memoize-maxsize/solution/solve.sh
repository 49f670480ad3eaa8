#!/usr/bin/env bash
# The fix: the bounded memory (LRUMemory) counts a result returned from memory as a use -- the memoizing wrapper
# reads memory[key], and only .get() refreshed recency, so the memory forgot the oldest stored result, hot or not;
# the keys were never the cause (keyword and positional calls are different keys by design). A regression test.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/fix.patch"
