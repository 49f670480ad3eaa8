#!/usr/bin/env bash
# The main job on a fresh machine with only Python: install what it needs (bubblewrap and setpriv for the sandboxes
# of RL, evaluation and the suite; the Python requirements), then run bulk → long → SFT → RL → evaluation → suite v0
# (experiments/pipeline.py; extra arguments are passed on, e.g. --workdir DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v bwrap >/dev/null 2>&1 || ! command -v setpriv >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap util-linux >/dev/null
fi
python -m pip install -q -r requirements.txt
exec python -m experiments.pipeline "$@"
