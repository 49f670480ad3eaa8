#!/usr/bin/env bash
# The exclusive end of a Monday-to-Sunday week is the next Monday 00:00: start + 7 days.
set -euo pipefail
sed -i 's/return start, start + dt.timedelta(days=6)/return start, start + dt.timedelta(days=7)/' reports/dates.py
