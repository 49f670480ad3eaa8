#!/usr/bin/env bash
# Finishes the export that the history's last two commits started (docs/export.md): to_dict / Docstring.to_dict /
# to_json in a new module (the keys in order, kind from args[0], yields among returns, the first deprecation only,
# plain meta items under "other", empty descriptions as null, non-ASCII kept), exported by the package; the
# command-line tool `python -m docstring_parser` (stdin or a file, --style, --to json or a style through compose,
# --rendering refused with json, parse errors on stderr with status 1); the README section, the design notes'
# status; the examples' xfail marker removed, more tests and the tool's tests.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/fix.patch"
