"""Reading captures."""

import base64
import json


def read_chunks(path):
    """The raw byte chunks of a capture, in seq order."""
    with open(path, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    data = sorted((r for r in records if "data" in r), key=lambda r: r["seq"])
    return [base64.b64decode(r["data"]) for r in data]
