#!/usr/bin/env bash
set -euo pipefail
python3 - <<'PY'
p = "pathmatch/match.py"
s = open(p).read()
s = s.replace('''"""Path pattern matching: `*` (any run of characters except /), `?` (one character except /), `[...]` (a set)."""''',
'''"""Path pattern matching: `*` (any run of characters except /), `?` (one character except /), `[...]` (a set),
and `**` as a whole segment: `**/` zero or more directories, a trailing `/**` everything inside."""''')
s = s.replace('''        if c == "*":
            while''', '''        at_start = i == 0 or pattern[i - 1] == "/"
        if pattern.startswith("**/", i) and at_start:
            out.append("(?:[^/]+/)*")
            i += 3
            continue
        if pattern.startswith("**", i) and at_start and i + 2 == len(pattern):
            out.append(".+" if i else ".*")
            i += 2
            continue
        if c == "*":
            while''')
open(p, "w").write(s)
PY
