#!/usr/bin/env bash
# The fix is in last week's kbd plugin, not in tables: key names trimmed and always escaped, "Ctrl++" split as Ctrl
# and +, brackets without a key left as text, and the markdown and RST renderers given their kbd output (normal form,
# the :kbd: role) instead of failing; tests and a changelog line.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/fix.patch"
