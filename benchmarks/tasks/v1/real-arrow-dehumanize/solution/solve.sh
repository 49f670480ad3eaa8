#!/usr/bin/env bash
# The upstream change: arrow 1.0.3 -> 1.1.0 (arrow/ and tests/ of the two sdists, on the tree with the history
# replayed: the changelog entries, the docs section and constants.DEHUMANIZE_LOCALES (less the locales 1.0.3 does
# not have) are already committed there; the release's new locales and locale-name standardisation come along in
# arrow/; made with `git diff` of that tree against the same tree with arrow/ and tests/ taken from the
# arrow-1.1.0 sdist, as `python -m benchmarks.release_diff` makes it).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
