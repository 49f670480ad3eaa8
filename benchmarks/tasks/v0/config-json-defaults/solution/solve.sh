#!/usr/bin/env bash
# default.json had a trailing comma, a string timeout, no pool_size and an upper-case log level; the developers'
# local.json files happened to override all of them.
set -euo pipefail
cat > config/default.json <<'JSON'
{
  "server": {"port": 8080, "timeout_s": 30, "tls": false},
  "database": {"url": "sqlite:///data/app.db", "pool_size": 5},
  "log_level": "info",
  "features": ["search", "export"]
}
JSON
