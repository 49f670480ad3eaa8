import argparse
import json

from app.settings import load

p = argparse.ArgumentParser()
p.add_argument("--config", default="config.json")
print(json.dumps(load(p.parse_args().config), sort_keys=True))
