#!/usr/bin/env bash
# The upstream change: more-itertools 10.1.0 -> 10.2.0 (more_itertools/, docs/api.rst, docs/versions.rst and tests/
# of the two sdists; made with `python -m benchmarks.release_diff more-itertools-10.1.0.tar.gz
# more-itertools-10.2.0.tar.gz more_itertools docs/api.rst docs/versions.rst tests`).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
