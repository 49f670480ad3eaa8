#!/usr/bin/env bash
# The upstream change: dpath 2.0.8 -> 2.1.0 for what the history commit's README and tests use (dpath/__init__.py
# holding new, delete, set, get, values, search and merge; dpath/types.py's MergeType flag enum and type aliases;
# dpath/segments.py's kvs renamed make_walkable, with type hints; dpath/util.py reduced to wrappers that warn with a
# DeprecationWarning): dpath/ (every file) and setup.py taken whole from the 2.1.0 sdist, so the release's other edits
# to those files come along (docstrings, f-strings, the version); made with `git diff` of the tree with the history
# replayed against the same tree with those files taken from the dpath-2.1.0 sdist, as
# `python -m benchmarks.release_diff` makes it.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
