#!/usr/bin/env bash
# The reference detector: a purchase was charged twice when the ledger holds two distinct charge transactions
# written by the attempts (gateway retries and client retries alike) of one idempotency key.
set -euo pipefail
cp "$(dirname "$0")/detect.py" detect.py
