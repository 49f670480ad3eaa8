#!/usr/bin/env bash
# The upstream change: structlog 23.1.0 -> 23.2.0 for the items the history commit lists (src/structlog/
# processors.py, dev.py, _log_levels.py and their tests, tests/test_processors.py, test_dev.py, test_log_levels.py,
# taken whole from the 23.2.0 sdist, so the release's reformatting and other items in those files come along: the
# Rich traceback formatter, UTC-aware TimeStamper; made with `git diff` of the tree with the history replayed
# against the same tree with those files taken from the structlog-23.2.0 sdist, as
# `python -m benchmarks.release_diff` makes it).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
