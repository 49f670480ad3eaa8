"""Path pattern matching: `*` (any run of characters except /), `?` (one character except /), `[...]` (a set)."""

import functools
import re


@functools.lru_cache(maxsize=512)
def _compile(pattern):
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            while i + 1 < len(pattern) and pattern[i + 1] == "*":
                i += 1
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 2)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:j]
                negate = body.startswith("!")
                body = body[1:] if negate else body
                out.append("[" + ("^/" if negate else "") + body.replace("\\", "\\\\") + "]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


def match(pattern, path):
    """True if the whole path matches the pattern."""
    return _compile(pattern).match(path) is not None
