#!/usr/bin/env bash
# The upstream change: validators 0.26.0 -> 0.27.0 (src/validators, tests/, docs/, CHANGES.md and mkdocs.yaml of the
# two sdists; made with `python -m benchmarks.release_diff validators-0.26.0.tar.gz validators-0.27.0.tar.gz
# src/validators tests docs CHANGES.md mkdocs.yaml`, less the generated man page docs/validators.1, which the project ignores).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
