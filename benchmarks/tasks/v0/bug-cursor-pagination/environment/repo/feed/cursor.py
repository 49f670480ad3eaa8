"""Opaque cursors: what the client passes back to get the next page."""

import base64
import json


def encode(position):
    return base64.urlsafe_b64encode(json.dumps(position).encode()).decode()


def decode(cursor):
    try:
        return json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, TypeError) as e:
        raise ValueError(f"invalid cursor {cursor!r}") from e
