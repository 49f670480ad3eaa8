#!/usr/bin/env bash
# The reference detector: a meter billed (distinct interval ids) more energy than its counter measured.
set -euo pipefail
cp "$(dirname "$0")/detect.py" detect.py
