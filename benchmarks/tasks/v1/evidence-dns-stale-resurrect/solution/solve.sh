#!/usr/bin/env bash
# The reference detector: an outdated address answered (hit or miss) by a node whose last successful upstream fetch
# of the name had already expired.
set -euo pipefail
cp "$(dirname "$0")/detect.py" detect.py
