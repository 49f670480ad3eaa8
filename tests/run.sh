#!/usr/bin/env bash
# Install everything the tests need on a fresh machine with only Python, then run the suite.
# Used verbatim by the README quickstart and by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

# bubblewrap: the sandboxes of composer2_jax.env are real Linux namespaces; setpriv (util-linux) starts them as
# an unprivileged uid. podman + debootstrap build the images of Dockerfile tasks (composer2_jax.env.images): bases
# are bootstrapped from Debian's archive and cached in $COMPOSER2_IMAGE_CACHE (default /var/cache/composer2/images),
# so only the first run on a machine builds them (a few minutes). The desktop image (Chromium, Xvfb, openbox: ~234 MB
# of Debian packages) is built the same way by the slow step's tests/test_env_desktop.py; the host needs nothing more.
if ! command -v bwrap >/dev/null 2>&1 || ! command -v setpriv >/dev/null 2>&1 || ! command -v podman >/dev/null 2>&1 \
    || ! command -v debootstrap >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap util-linux podman debootstrap >/dev/null
fi
python -m pip install -q -r requirements-dev.txt

# Lint first (ruff, configured in pyproject.toml): a finding fails the run.
python -m ruff check .

# The fast suite (budget: 20 minutes on 2 cores), then the slow-marked tests in their own bounded step. Two
# workers (PYTEST_WORKERS), each running whole files: most tests are single-threaded XLA compiles.
# A crashed worker fails the run at once (--max-worker-restart=0: a replacement worker can leave xdist waiting
# forever), and each step has a wall-clock bound, so a hang fails here instead of eating CI's whole budget.
WORKERS="${PYTEST_WORKERS:-2}"
XDIST=(-n "$WORKERS" --dist loadfile --max-worker-restart=0)
timeout 2400 python -m pytest -q "${XDIST[@]}" -m "not slow" --durations=15 "$@"
timeout 3000 python -m pytest -q "${XDIST[@]}" -m slow "$@" || { rc=$?; [ "$rc" = 5 ] || exit "$rc"; }
