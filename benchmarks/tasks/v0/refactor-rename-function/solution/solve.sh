#!/usr/bin/env bash
set -euo pipefail
python3 - <<'PY'
import re
p = "geometry/area.py"
s = open(p).read()
s = s.replace('"""Areas."""\n', '"""Areas."""\n\nimport warnings\n')
s = s.replace("def calc(points):", "def polygon_area(points):")
s += '''

def calc(points):
    """Deprecated alias of polygon_area."""
    warnings.warn("geometry.area.calc is deprecated; use polygon_area", DeprecationWarning, stacklevel=2)
    return polygon_area(points)
'''
open(p, "w").write(s)
for p, old, new in [("geometry/shapes.py", "calc", "polygon_area"), ("geometry/report.py", "area.calc", "area.polygon_area"),
                    ("tests/test_area.py", "calc", "polygon_area")]:
    s = open(p).read()
    open(p, "w").write(re.sub(r"\b%s\b" % re.escape(old), new, s))
PY
