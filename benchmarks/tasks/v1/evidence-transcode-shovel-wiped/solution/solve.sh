#!/usr/bin/env bash
# The reference detector: a video is lost when its transcode job's last POST to the farm API was queued for a retry,
# it was never submitted, rejected or spilled to disk, and its shovel node stopped after that attempt (shovel logs,
# joined to the upload worker's video by worker name and publish tag).
set -euo pipefail
cp "$(dirname "$0")/detect.py" detect.py
