#!/usr/bin/env bash
# The upstream change: pluggy 1.3.0 -> 1.4.0 (made with `python -m benchmarks.release_diff pluggy-1.3.0.tar.gz
# pluggy-1.4.0.tar.gz src/pluggy/__init__.py src/pluggy/_callers.py src/pluggy/_hooks.py src/pluggy/_manager.py
# src/pluggy/_result.py src/pluggy/_warnings.py testing docs/api_reference.rst docs/index.rst CHANGELOG.rst`: the
# release less its generated version file).
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
