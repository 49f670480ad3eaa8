#!/bin/bash
python3 - <<'PY'
import json, pathlib
p = pathlib.Path("/app/greeting.txt")
text = p.read_text() if p.exists() else ""
exact = float(text == "hello, world\n")
json.dump({"reward": exact, "exists": float(p.exists()), "lines": float(len(text.splitlines())), "note": "kept out"},
          open("/logs/verifier/reward.json", "w"))
PY
