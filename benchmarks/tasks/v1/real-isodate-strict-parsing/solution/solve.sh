#!/usr/bin/env bash
# The upstream change: isodate 0.6.1 -> 0.7.0 (the modules of src/isodate/ and CHANGES.txt of the two sdists; made
# with `python -m benchmarks.release_diff isodate-0.6.1.tar.gz isodate-0.7.0.tar.gz src/isodate/__init__.py ...
# src/isodate/version.py CHANGES.txt`, every .py file of 0.7.0's src/isodate/ named).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
