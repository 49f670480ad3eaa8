#!/usr/bin/env bash
# The upstream change: PyJWT 2.7.0 -> 2.8.0 for the items the history commit lists (jwt/api_jwt.py: strict_aud in
# _validate_aud; jwt/jwks_client.py: ssl_context passed to urlopen; jwt/__init__.py: PyJWKClientConnectionError
# exported, the version; tests/test_api_jwt.py, tests/test_jwks_client.py: the release's tests), made with
# `python -m benchmarks.release_diff PyJWT-2.7.0.tar.gz PyJWT-2.8.0.tar.gz jwt/__init__.py jwt/api_jwt.py
# jwt/jwks_client.py tests/test_api_jwt.py tests/test_jwks_client.py`.
set -euo pipefail
patch -p1 --batch --no-backup-if-mismatch < "$(dirname "$0")/upstream.patch"
