#!/usr/bin/env bash
# The upstream change: platformdirs 3.2.0 -> 3.3.0 (src/platformdirs and tests/ of the two sdists, the version file
# and the history commit's api.py hunks left out; made with `python -m benchmarks.release_diff
# platformdirs-3.2.0.tar.gz platformdirs-3.3.0.tar.gz src tests` on the tree with the history replayed).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
