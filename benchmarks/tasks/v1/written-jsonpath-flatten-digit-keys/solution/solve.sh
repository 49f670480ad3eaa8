#!/usr/bin/env bash
# The fix: unflatten() rebuilds each container as the type of its own entry (flatten lists every object and array
# as an empty container of its type, before its members) and places members in their parent's container, checking
# document order (a parent entry before its members, array items by next index) -- the commit skipped the entries
# of non-empty containers and guessed an array from a digit token, so an object keyed "200" / "404" came back as a
# list padded with None. The escaping of "/" and "~" was never the cause. Regression tests.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/fix.patch"
