#!/usr/bin/env bash
# The reference detector: a reading is lost when its bridged message's last POST to the ingest API was queued for a
# retry, it was never forwarded, rejected or saved to disk, and its broker node stopped after that attempt (broker
# logs, joined to the gateway's reading by client id and MQTT message id).
set -euo pipefail
cp "$(dirname "$0")/detect.py" detect.py
