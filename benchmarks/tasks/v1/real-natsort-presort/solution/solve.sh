#!/usr/bin/env bash
# The upstream change: natsort 8.2.0 -> 8.3.0 (natsort/, tests/ and CHANGELOG.md of the two sdists; made with
# `python -m benchmarks.release_diff natsort-8.2.0.tar.gz natsort-8.3.0.tar.gz natsort tests CHANGELOG.md`).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
