#!/usr/bin/env bash
# The upstream change: boltons 23.0.0 -> 23.1.0 (boltons/ and setup.py of the two sdists; made with
# `python -m benchmarks.release_diff boltons-23.0.0.tar.gz boltons-23.1.0.tar.gz boltons setup.py`).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
