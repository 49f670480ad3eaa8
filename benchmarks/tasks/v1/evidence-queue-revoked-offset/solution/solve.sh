#!/usr/bin/env bash
# The reference detector: an accepted message that no consumer sent (any of its copies) and the broker did not
# dead-letter was never processed.
set -euo pipefail
cp "$(dirname "$0")/detect.py" detect.py
