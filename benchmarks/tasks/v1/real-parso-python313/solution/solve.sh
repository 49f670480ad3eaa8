#!/usr/bin/env bash
# The upstream change: parso 0.8.3 -> 0.8.4 for the items the history commit announces and tests (Python 3.13:
# parso/python/grammar313.txt; CPython 3.10's wordings in parso/python/errors.py for grammars of 3.10 and later,
# "dict literal", "ellipsis", "expression", and the non-ASCII bytes message without its full stop on an interpreter
# of 3.10 or later): parso/ (every file), setup.py and setup.cfg taken whole from the 0.8.4 sdist, so the release's
# other edits to those files come along (typed `# type: ignore[...]` comments in parso/grammar.py and
# parso/pgen2/generator.py, __slots__ in parso/python/tree.py, the version, the test and QA pins); made with
# `git diff` of the tree with the history replayed against the same tree with those files taken from the
# parso-0.8.4 sdist, as `python -m benchmarks.release_diff` makes it.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
