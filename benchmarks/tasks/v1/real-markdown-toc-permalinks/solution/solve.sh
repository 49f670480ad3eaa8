#!/usr/bin/env bash
# The upstream change: Python-Markdown 3.4.4 -> 3.5 (markdown/, docs/changelog.md and docs/extensions/toc.md of the
# two sdists; made with `python -m benchmarks.release_diff Markdown-3.4.4.tar.gz Markdown-3.5.tar.gz markdown
# docs/changelog.md docs/extensions/toc.md`).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
