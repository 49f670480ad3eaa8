#!/usr/bin/env bash
# The reference detector: a delivery is hurt when the outbox journal marked it delivered and none of its attempts
# (any worker, followed redirects included) had been answered 2xx by then (journal + workers' logs).
set -euo pipefail
cp "$(dirname "$0")/detect.py" detect.py
