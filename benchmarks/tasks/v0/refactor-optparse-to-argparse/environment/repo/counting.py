"""Counting."""

import collections
import re

WORD = re.compile(r"[A-Za-z0-9']+")


def stats(text, ignore_case=False):
    words = WORD.findall(text.lower() if ignore_case else text)
    return {"lines": text.count("\n"), "words": len(words), "chars": len(text), "freq": collections.Counter(words)}
