#!/usr/bin/env bash
# Write rows with the csv module, which quotes fields holding commas, quotes or newlines.
set -euo pipefail
cat > userexport/export.py <<'PY'
"""CSV export."""

import csv
import io

HEADER = ("id", "name", "email", "plan")


def _row(user):
    return [str(user.id), user.name, user.email, user.plan]


def to_csv(users):
    """The users as CSV text (RFC 4180 quoting): a header line, then one line per user."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(HEADER)
    for user in users:
        writer.writerow(_row(user))
    return buf.getvalue()
PY
