#!/usr/bin/env bash
# The reference detector: an order is hurt when the checkout saved it as paid in a transaction that committed
# (logs/db), and the fulfilment skipped it as pending after that save's message was sent and before the commit
# (checkout log + workers' logs + commit timestamps).
set -euo pipefail
cp "$(dirname "$0")/detect.py" detect.py
