#!/usr/bin/env bash
# Install everything the tests need on a fresh machine with only Python, then run the suite.
# Used verbatim by the README quickstart and by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

# bubblewrap: the sandboxes of composer2_jax.env are real Linux namespaces; setpriv (util-linux) starts them as
# an unprivileged uid.
if ! command -v bwrap >/dev/null 2>&1 || ! command -v setpriv >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap util-linux >/dev/null
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap util-linux >/dev/null
  fi
fi
python -m pip install -q -r requirements-dev.txt

# The fast suite (budget: 20 minutes on 2 cores), then the slow-marked tests in their own bounded step.
python -m pytest -q -m "not slow" --durations=15 "$@"
timeout 1800 python -m pytest -q -m slow "$@" || { rc=$?; [ "$rc" = 5 ] || exit "$rc"; }
