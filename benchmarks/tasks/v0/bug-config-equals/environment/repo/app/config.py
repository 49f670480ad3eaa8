"""settings.conf parser.

Format: one `key = value` per line. Blank lines and lines starting with `#` are ignored. Whitespace around
keys and values is stripped. Everything after the first `=` is the value, verbatim (it may itself contain `=`
or `#`). Keys are case-insensitive and stored lower-case. A line without `=` is an error naming the line number.
"""


class ConfigError(ValueError):
    pass


def parse(text):
    settings = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split("=")
        if len(parts) < 2:
            raise ConfigError(f"line {number}: expected 'key = value', got {line!r}")
        key, value = parts[0], parts[1]
        settings[key.strip().lower()] = value.strip()
    return settings


def load(path):
    with open(path, encoding="utf-8") as f:
        return parse(f.read())
