import json
import sys

from service.config import ConfigError, load

if sys.argv[1:] != ["check"]:
    print("usage: python3 -m service check", file=sys.stderr)
    sys.exit(2)
try:
    print(json.dumps(load(), indent=1, sort_keys=True))
except ConfigError as e:
    print(f"config error: {e}", file=sys.stderr)
    sys.exit(1)
