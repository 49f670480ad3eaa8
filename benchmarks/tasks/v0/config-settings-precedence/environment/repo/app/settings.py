"""Effective settings.

Precedence, lowest to highest: DEFAULTS < the JSON config file (if given and present) < environment variables
`APP_<KEY>` (upper-case key, e.g. APP_PORT) < explicit overrides passed to `load(..., overrides=)`.
Keys not in DEFAULTS are ignored wherever they come from. Every value is converted to the type of its default:
int from "8080", bool from "1"/"true"/"yes"/"on" (True) or "0"/"false"/"no"/"off" (False), case-insensitive; any
other text for a bool, or a non-integer for an int, is a ValueError naming the key. Lists are comma-separated
in environment variables ("a, b" -> ["a", "b"]) and JSON lists in the file.
"""

import json
import os

DEFAULTS = {"host": "127.0.0.1", "port": 8080, "debug": False, "workers": 2, "allowed_origins": ["localhost"]}
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _convert(key, value):
    default = DEFAULTS[key]
    if isinstance(default, bool):
        return bool(value)
    if isinstance(default, int):
        return int(value)
    if isinstance(default, list):
        return value.split(",") if isinstance(value, str) else list(value)
    return str(value)


def _from_env(environ):
    return {k[4:].lower(): v for k, v in environ.items() if k.startswith("APP_")}


def _from_file(path):
    if path and os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {}


def load(config_path=None, environ=None, overrides=None):
    environ = os.environ if environ is None else environ
    settings = dict(DEFAULTS)
    for layer in (_from_env(environ), _from_file(config_path), overrides or {}):
        for key, value in layer.items():
            settings[key] = _convert(key, value)
    return settings
