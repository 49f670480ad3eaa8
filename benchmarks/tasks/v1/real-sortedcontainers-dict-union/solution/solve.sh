#!/usr/bin/env bash
# The upstream change: sortedcontainers 2.3.0 -> 2.4.0 (sortedcontainers/ and tests/ of the two sdists; made with
# `python -m benchmarks.release_diff sortedcontainers-2.3.0.tar.gz sortedcontainers-2.4.0.tar.gz sortedcontainers tests`).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
