#!/usr/bin/env bash
# The upstream change: tenacity 8.3.0 -> 8.4.0 (tenacity/ and tests/ of the two sdists, on the tree with the history
# replayed: the new tenacity/asyncio/retry.py and its release note are already committed there; the release's Trio
# support -- the portable sleep's trio branch, its test and its release note -- left out; made with
# `python -m benchmarks.release_diff tenacity-8.3.0.tar.gz tenacity-8.4.0.tar.gz tenacity tests`, then edited).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
