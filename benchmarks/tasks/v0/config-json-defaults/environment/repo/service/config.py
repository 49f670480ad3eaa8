"""Loading and validating the configuration (a small subset of JSON Schema: type, required, enum, minimum)."""

import json
import os

TYPES = {"string": str, "integer": int, "boolean": bool, "object": dict, "array": list, "number": (int, float)}


class ConfigError(Exception):
    pass


def _read(path):
    try:
        with open(path) as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: invalid JSON: {e}") from None


def validate(value, schema, where="config"):
    expected = TYPES[schema["type"]]
    if not isinstance(value, expected) or (schema["type"] in ("integer", "number") and isinstance(value, bool)):
        raise ConfigError(f"{where}: expected {schema['type']}, got {type(value).__name__} {value!r}")
    if "enum" in schema and value not in schema["enum"]:
        raise ConfigError(f"{where}: {value!r} is not one of {schema['enum']}")
    if "minimum" in schema and value < schema["minimum"]:
        raise ConfigError(f"{where}: {value!r} is below the minimum {schema['minimum']}")
    for key in schema.get("required", []):
        if key not in value:
            raise ConfigError(f"{where}: missing required key {key!r}")
    for key, sub in schema.get("properties", {}).items():
        if key in value:
            validate(value[key], sub, f"{where}.{key}")


def merge(base, extra):
    out = dict(base)
    for k, v in extra.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load(root="config"):
    config = _read(os.path.join(root, "default.json"))
    local = os.path.join(root, "local.json")
    if os.path.exists(local):
        config = merge(config, _read(local))
    validate(config, _read(os.path.join(root, "schema.json")))
    return config
