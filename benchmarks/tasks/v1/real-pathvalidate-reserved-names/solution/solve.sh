#!/usr/bin/env bash
# The upstream change: pathvalidate 3.1.0 -> 3.2.0 for what the history commit's tests and README expect
# (pathvalidate/handler.py's ReservedNameHandler and NullValueHandler, the module-level handlers deprecated;
# reserved_name_handler and additional_reserved_names threaded through pathvalidate/_base.py, _filename.py and
# _filepath.py, check_reserved of the sanitizers deprecated; pathvalidate/error.py's ErrorAttrKey, fs_encoding and
# byte_count, `platform=` in messages): pathvalidate/ (every file) taken whole from the 3.2.0 sdist, so the release's
# other edits to those files come along (type hints in pathvalidate/click.py, the version); made with `git diff` of
# the tree with the history replayed against the same tree with those files taken from the pathvalidate-3.2.0
# sdist, as `python -m benchmarks.release_diff` makes it.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
