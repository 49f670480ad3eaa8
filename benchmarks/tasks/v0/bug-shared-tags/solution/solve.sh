#!/usr/bin/env bash
# No mutable defaults: copy the tags per post, and never write into the caller's (or the default) options.
set -euo pipefail
python3 - <<'PY'
p = "tagging/models.py"
s = open(p).read()
s = s.replace('def __init__(self, title, tags=[], visibility="public"):', 'def __init__(self, title, tags=None, visibility="public"):')
s = s.replace("        self.tags = tags\n", "        self.tags = list(tags) if tags is not None else []\n")
open(p, "w").write(s)
p = "tagging/service.py"
s = open(p).read()
s = s.replace("def bulk_create(titles, options={}):", "def bulk_create(titles, options=None):")
s = s.replace("    options.update({k: v for k, v in DEFAULTS.items() if k not in options})\n",
              "    options = {**DEFAULTS, **(options or {})}\n")
open(p, "w").write(s)
PY
