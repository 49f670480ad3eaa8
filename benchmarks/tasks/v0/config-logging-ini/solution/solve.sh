#!/usr/bin/env bash
# The console handler named a formatter that does not exist ('brief' vs 'short'), and the service logger had its
# own file handler while also propagating to root's, so every record reached the file twice.
set -euo pipefail
python3 - <<'PY'
p = "logging.ini"
s = open(p).read()
s = s.replace("formatter=brief\n", "formatter=short\n")
s = s.replace("[logger_service]\nlevel=DEBUG\nhandlers=file\n", "[logger_service]\nlevel=DEBUG\nhandlers=\n")
s = s.replace("level=WARN\n", "level=WARNING\n")
open(p, "w").write(s)
PY
