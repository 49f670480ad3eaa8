#!/usr/bin/env bash
# The upstream change: semver 3.0.1 -> 3.0.2 (src/semver, tests, CHANGELOG.rst of the two sdists; made with
# `python -m benchmarks.release_diff semver-3.0.1.tar.gz semver-3.0.2.tar.gz src/semver tests CHANGELOG.rst`).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
