#!/usr/bin/env bash
# The reference detector: a cache hit of a tenant-scoped page whose entity tag the origin never produced for the
# session's tenant on that page carried another tenant's response.
set -euo pipefail
cp "$(dirname "$0")/detect.py" detect.py
