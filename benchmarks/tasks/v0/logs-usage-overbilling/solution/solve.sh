#!/usr/bin/env bash
# message_delta usage is cumulative: the output count is the last one, not the sum. A response was over-billed
# exactly when the sum of its message_delta counts exceeds the last count.
set -euo pipefail
python3 - <<'PY'
p = "billing/usage.py"
s = open(p).read()
s = s.replace('            output_tokens += event["usage"]["output_tokens"]\n',
              '            output_tokens = event["usage"]["output_tokens"]  # cumulative: the latest is the total\n')
open(p, "w").write(s)
PY
cat > detect.py <<'PY'
"""Responses the released billing (which summed cumulative message_delta usage) over-billed."""

from billing.usage import read_events


def is_overbilled(path):
    counts = [e["usage"]["output_tokens"] for e in read_events(path) if e["type"] == "message_delta"]
    return bool(counts) and sum(counts) > counts[-1]
PY
