#!/usr/bin/env bash
# The reference detector: a session is hurt when a reuse of its refresh token within the 10-second grace of the
# rotation, by the install that rotated it (the gateway's device id of both requests), revoked it (auth nodes'
# logs + gateway log).
set -euo pipefail
cp "$(dirname "$0")/detect.py" detect.py
