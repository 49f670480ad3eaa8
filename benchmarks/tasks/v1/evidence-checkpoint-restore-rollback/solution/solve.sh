#!/usr/bin/env bash
# The reference detector: a resume (not a user's restart) that restored another checkpoint than the job's newest
# finished, undeleted one redid saved work.
set -euo pipefail
cp "$(dirname "$0")/detect.py" detect.py
