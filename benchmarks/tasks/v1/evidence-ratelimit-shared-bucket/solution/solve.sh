#!/usr/bin/env bash
# The reference detector: a rate_limit refusal with fewer of the key's own requests admitted in that calendar
# minute than the limit of the plan in force was the limiter counting someone else's traffic.
set -euo pipefail
cp "$(dirname "$0")/detect.py" detect.py
