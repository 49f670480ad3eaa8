"""python3 -m userexport USERS_JSON OUT_CSV"""

import sys

from userexport.export import to_csv
from userexport.models import load_users


def main(argv):
    if len(argv) != 2:
        print("usage: python3 -m userexport USERS_JSON OUT_CSV", file=sys.stderr)
        return 2
    users = load_users(argv[0])
    with open(argv[1], "w", encoding="utf-8", newline="") as f:
        f.write(to_csv(users))
    print(f"exported {len(users)} users to {argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
