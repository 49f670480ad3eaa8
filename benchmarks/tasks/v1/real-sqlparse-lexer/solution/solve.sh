#!/usr/bin/env bash
# The upstream change: sqlparse 0.4.3 -> 0.4.4 (sqlparse/, CHANGELOG, docs/source/extending.rst and index.rst, and the
# changed tests of the two sdists; made with `python -m benchmarks.release_diff sqlparse-0.4.3.tar.gz
# sqlparse-0.4.4.tar.gz sqlparse CHANGELOG docs/source/extending.rst docs/source/index.rst tests/test_grouping.py
# tests/test_keywords.py tests/test_parse.py tests/test_regressions.py tests/test_split.py`).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
