#!/usr/bin/env bash
set -euo pipefail
python3 - <<'PY'
p = "app/settings.py"
s = open(p).read()
start, end = s.index("def _convert(key, value):"), s.index("def _from_env(environ):")
s = s[:start] + '''def _convert(key, value):
    default = DEFAULTS[key]
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise ValueError(f"setting {key!r}: {value!r} is not a boolean (expected one of {sorted(_TRUE | _FALSE)})")
    if isinstance(default, int):
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ValueError(f"setting {key!r}: {value!r} is not an integer") from None
    if isinstance(default, list):
        return [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else list(value)
    return str(value)


''' + s[end:]
s = s.replace("    for layer in (_from_env(environ), _from_file(config_path), overrides or {}):\n        for key, value in layer.items():\n",
              "    for layer in (_from_file(config_path), _from_env(environ), overrides or {}):\n        for key, value in layer.items():\n"
              "            if key not in DEFAULTS:\n                continue\n")
open(p, "w").write(s)
PY
