#!/usr/bin/env bash
# Finishes key_transform, which the history's last two commits started: camel, pascal and kebab case by the
# quickstart's rules (edge underscores kept, inner runs as one, parts kept as written), a function allowed, anything
# else a ValueError at class definition, applied to every field without a data_key when the schema builds its fields.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/fix.patch"
