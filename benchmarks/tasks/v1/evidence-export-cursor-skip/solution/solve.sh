#!/usr/bin/env bash
# The reference detector: a finished export is hurt when a contact that existed from its first page to its last
# (snapshot + change stream) is in none of its pages.
set -euo pipefail
cp "$(dirname "$0")/detect.py" detect.py
