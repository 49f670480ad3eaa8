#!/usr/bin/env bash
# The upstream change: cachetools 5.2.1 -> 5.3.0 (src/cachetools/, CHANGELOG.rst, docs/index.rst and
# tests/test_cached.py of the two sdists; made with `python -m benchmarks.release_diff cachetools-5.2.1.tar.gz
# cachetools-5.3.0.tar.gz src/cachetools CHANGELOG.rst docs/index.rst tests/test_cached.py`).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
