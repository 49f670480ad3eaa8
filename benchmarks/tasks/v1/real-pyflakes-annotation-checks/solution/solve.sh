#!/usr/bin/env bash
# The upstream change: pyflakes 2.5.0 -> 3.0.0 (pyflakes/ of the two sdists, tests included, on the tree with the
# history replayed: the news entries and the UnusedAnnotation message are already committed there; the release's
# removal of Python 2 type comments comes along; made with `git diff` of that tree against the same tree with
# pyflakes/ taken from the pyflakes-3.0.0 sdist, as `python -m benchmarks.release_diff` makes it).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
