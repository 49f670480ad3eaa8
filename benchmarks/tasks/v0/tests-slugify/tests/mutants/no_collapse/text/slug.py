"""URL slugs."""

import re
import unicodedata


def slugify(title, max_length=50):
    """A URL slug for a title.

    Accents are removed (é -> e) and other non-ASCII characters dropped; the result is lower case; every run of
    characters other than a-z and 0-9 becomes a single '-'; there is no '-' at either end. If the slug is longer
    than max_length it is cut to at most max_length characters at a '-' boundary when there is one (a single
    word longer than max_length is cut at max_length), again with no trailing '-'. An empty result is 'n-a'.
    """
    text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^a-z0-9]", "-", text.lower()).strip("-")
    if len(text) > max_length:
        cut = text[:max_length + 1]
        text = cut[:cut.rfind("-")] if "-" in cut else text[:max_length]
        text = text.rstrip("-")
    return text or "n-a"
