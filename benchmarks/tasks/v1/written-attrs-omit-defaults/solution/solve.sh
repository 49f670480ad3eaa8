#!/usr/bin/env bash
# The fix: omit_defaults compares the stored value (before the value serializer) with the default, a Factory's by a
# fresh value from it; it is passed down every recursive call (nested instances, collections, dict keys and values)
# and through attrs.asdict; type stubs; tests.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/fix.patch"
