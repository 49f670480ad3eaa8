#!/usr/bin/env bash
# The upstream change: tqdm 4.65.2 -> 4.66.0 (tqdm/std.py, tqdm/cli.py and tqdm/tqdm.1 of the two sdists, and the
# README's documentation of the decorated constructor; the history commit already holds the release's envwrap, its
# tests and the README's troubleshooting entry; the release's unrelated URL and contributor-table edits left out).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
