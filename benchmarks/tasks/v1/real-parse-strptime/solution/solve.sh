#!/usr/bin/env bash
# The upstream change: parse 1.19.1 -> 1.20.0 (parse.py and README.rst of the two sdists; made with
# `python -m benchmarks.release_diff parse-1.19.1.tar.gz parse-1.20.0.tar.gz parse.py README.rst`).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
