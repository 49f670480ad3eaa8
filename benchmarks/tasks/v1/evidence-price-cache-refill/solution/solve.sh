#!/usr/bin/env bash
# The reference detector: an order is hurt when its node priced it with a price out of effect after receiving the
# invalidation of the change in effect (commit log + cache logs + orders).
set -euo pipefail
cp "$(dirname "$0")/detect.py" detect.py
