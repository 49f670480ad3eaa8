#!/usr/bin/env bash
# The upstream change: loguru 0.6.0 -> 0.7.0 (loguru/ and the release's new tests/test_filesink_watch.py, on the
# tree with the history replayed: the watch option's docstring and stub are already committed there; the
# release's other test changes left out; made with `git diff` of that tree against the same tree with those paths
# taken from the loguru-0.7.0 sdist, as `python -m benchmarks.release_diff` makes it).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
