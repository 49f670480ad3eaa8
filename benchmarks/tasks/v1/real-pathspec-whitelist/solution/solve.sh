#!/usr/bin/env bash
# The upstream change: pathspec 0.11.2 -> 0.12.0 (pathspec/, CHANGES.rst and doc/source/api.rst of the two sdists;
# made with `python -m benchmarks.release_diff pathspec-0.11.2.tar.gz pathspec-0.12.0.tar.gz pathspec CHANGES.rst
# doc/source/api.rst`).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
