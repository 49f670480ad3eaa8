#!/usr/bin/env bash
set -euo pipefail
cat > bin/greeter <<'SH'
#!/bin/sh
# Entry point of the greeter command line: puts <repo>/src on PYTHONPATH, wherever the script is called from.
here=$(dirname "$(readlink -f "$0")")
PYTHONPATH="$here/../src${PYTHONPATH:+:$PYTHONPATH}" exec python3 -m greeter.cli "$@"
SH
chmod +x bin/greeter
