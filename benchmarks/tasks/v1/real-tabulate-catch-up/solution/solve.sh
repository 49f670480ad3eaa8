#!/usr/bin/env bash
# The upstream change: tabulate 0.8.10 -> 0.9.0 (tabulate.py becomes the package tabulate/ with version.py, and
# CHANGELOG, of the two sdists; made with `python -m benchmarks.release_diff tabulate-0.8.10.tar.gz
# tabulate-0.9.0.tar.gz tabulate.py tabulate/__init__.py tabulate/version.py CHANGELOG`).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
