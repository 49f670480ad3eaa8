#!/usr/bin/env bash
# The upstream change: packaging 23.0 -> 23.1 without the release's new metadata module: src/packaging/{__init__,
# _manylinux,_parser,_tokenizer,markers,requirements,specifiers,tags,version}.py and tests/test_{manylinux,
# requirements,specifiers,tags}.py (made with `python -m benchmarks.release_diff packaging-23.0.tar.gz
# packaging-23.1.tar.gz PATHS...`).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
