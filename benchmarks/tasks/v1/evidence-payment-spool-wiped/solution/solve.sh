#!/usr/bin/env bash
# The reference detector: an email is lost when its message's last relay attempt was deferred, it was never sent,
# bounced or handed to another node, and its node restarted after that deferral (relay logs, joined to the rq job
# by the Message-ID).
set -euo pipefail
cp "$(dirname "$0")/detect.py" detect.py
