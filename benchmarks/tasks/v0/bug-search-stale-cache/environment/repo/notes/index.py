"""Tokenizing."""

import re

WORD = re.compile(r"[a-z0-9]+")


def words(text):
    return set(WORD.findall(text.lower()))
