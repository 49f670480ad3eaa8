"""Event payloads: the fields each type must carry, sizes per type, and redaction before sharing with support."""

import collections
import json
import re

REQUIRED = {"id", "type", "tenant", "created", "api_version", "data"}
OBJECT_REQUIRED = {"id", "object"}
SECRET_KEYS = {"idempotency_key", "customer", "email", "card"}
EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")


def problems(event):
    """What is wrong with an event's shape, as short strings (empty when fine)."""
    out = ["missing %s" % k for k in sorted(REQUIRED - set(event))]
    obj = event.get("data", {}).get("object") if isinstance(event.get("data"), dict) else None
    if obj is None:
        out.append("no data.object")
    else:
        out += ["data.object missing %s" % k for k in sorted(OBJECT_REQUIRED - set(obj))]
    if "type" in event and "." not in str(event["type"]):
        out.append("type without a resource: %r" % event["type"])
    return out


def sizes(events):
    """{type: (count, mean bytes, max bytes)} of the events as sent (compact JSON)."""
    acc = collections.defaultdict(list)
    for e in events:
        acc[e.get("type", "?")].append(len(json.dumps(e, separators=(",", ":")).encode()))
    return {t: (len(v), sum(v) / len(v), max(v)) for t, v in sorted(acc.items())}


def redact(value):
    """A copy with secret keys masked and e-mail addresses replaced, for tickets."""
    if isinstance(value, dict):
        return {k: ("***" if k in SECRET_KEYS else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return EMAIL.sub("<email>", value)
    return value
