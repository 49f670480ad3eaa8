#!/usr/bin/env bash
# The reference detector: a reconnect lost bytes when the worker restarted after the offset the client asked for.
set -euo pipefail
cp "$(dirname "$0")/detect.py" detect.py
