#!/usr/bin/env bash
# The fix: merge_deep copies every mapping of the result through factory, even one that a single input holds at a
# key (the feature handed that mapping out as it was, so changing the merged result changed the input behind it);
# the curried form was never the cause. Regression tests for sharing and for factory at every depth.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/fix.patch"
