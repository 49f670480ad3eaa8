#!/usr/bin/env bash
# Heartbeats are signs of life too: any server event must reset the watchdog. A reconnect was spurious when the
# server had sent anything (heartbeat included) within the timeout before it.
set -euo pipefail
python3 - <<'PY'
p = "agentstream/watchdog.py"
s = open(p).read()
s = s.replace('''        if event["type"] == "delta":
            self.last = event["ts"]''', '''        self.last = max(self.last, event["ts"])''')
open(p, "w").write(s)
PY
cat > detect.py <<'PY'
"""Sessions whose connection the released client dropped while it was alive (heartbeats did not count)."""

import json

from agentstream.watchdog import TIMEOUT_MS


def is_spurious(path):
    last_server = None
    with open(path, encoding="utf-8") as f:
        for event in map(json.loads, filter(str.strip, f)):
            if event["type"] == "client_reconnect":
                if last_server is not None and event["ts"] - last_server <= TIMEOUT_MS:
                    return True
            elif not event["type"].startswith("client_"):
                last_server = event["ts"]
    return False
PY
