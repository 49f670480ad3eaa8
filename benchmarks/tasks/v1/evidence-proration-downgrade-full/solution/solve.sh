#!/usr/bin/env bash
# The reference detector: an immediate downgrade's invoice is hurt when it is no correction (24 hours from the
# cycle's start) and the ledger issued no proration credit note for it (events + invoice export + ledger logs).
set -euo pipefail
cp "$(dirname "$0")/detect.py" detect.py
