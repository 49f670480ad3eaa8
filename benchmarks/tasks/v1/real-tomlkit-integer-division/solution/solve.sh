#!/usr/bin/env bash
# The upstream change: tomlkit 0.12.1 -> 0.12.2 (tomlkit/, tests/, CHANGELOG.md of the two sdists; made with
# `python -m benchmarks.release_diff tomlkit-0.12.1.tar.gz tomlkit-0.12.2.tar.gz tomlkit tests CHANGELOG.md`).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
