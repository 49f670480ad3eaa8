"""python3 -m geometry.report shapes.json"""

import json
import sys

from geometry import area


def table(named):
    rows = [f"{name:<12} {area.calc(points):>10.2f}" for name, points in sorted(named.items())]
    return "\n".join(rows)


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print(table({k: [tuple(p) for p in v] for k, v in json.load(f).items()}))
