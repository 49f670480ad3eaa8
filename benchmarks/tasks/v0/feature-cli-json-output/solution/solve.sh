#!/usr/bin/env bash
set -euo pipefail
python3 - <<'PY'
p = "todo/__main__.py"
s = open(p).read()
s = s.replace("import argparse\nimport sys\n", "import argparse\nimport json\nimport sys\n")
s = s.replace('''    ls.add_argument("--pending", action="store_true", help="only items not done")\n''',
              '''    ls.add_argument("--pending", action="store_true", help="only items not done")
    ls.add_argument("--json", action="store_true", help="print a JSON array of {id, title, done}")\n''')
s = s.replace('''    else:
        for item in items:
            if args.pending and item["done"]:
                continue
            print(''', '''    else:
        shown = [item for item in items if not (args.pending and item["done"])]
        if args.json:
            print(json.dumps([{"id": i["id"], "title": i["title"], "done": i["done"]} for i in shown]))
            return 0
        for item in shown:
            print(''')
open(p, "w").write(s)
PY
