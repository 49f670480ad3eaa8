#!/usr/bin/env bash
# The upstream change: dacite 1.7.0 -> 1.8.0 for the item the history commit documents (the LRU cache:
# dacite/cache.py's set_cache_size, get_cache_size and clear_cache, exported by dacite/__init__.py; the cached
# helpers of dacite/types.py and dacite/dataclasses.py; dacite/core.py's type hints cached per class and per
# Config.hashable_forward_references, a dacite/frozen_dict.py FrozenDict, dacite/config.py, dacite/data.py):
# dacite/*.py, setup.py, pyproject.toml and README.md taken whole from the 1.8.0 sdist, so the release's other edits
# to those files come along (type hooks and casts applied in one place, the README's performance-testing notes);
# made with `git diff` of the tree with the history replayed against the same tree with those files taken from the
# dacite-1.8.0 sdist, as `python -m benchmarks.release_diff` makes it.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
