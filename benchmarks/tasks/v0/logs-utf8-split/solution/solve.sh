#!/usr/bin/env bash
# Each chunk was decoded on its own, so a character cut between two chunks became U+FFFD. Decode incrementally;
# a capture is affected exactly when some chunk is not valid UTF-8 by itself.
set -euo pipefail
cat > streamclient/decoder.py <<'PY'
"""Turning streamed bytes into text."""

import codecs


def decode_chunks(chunks):
    """The response text from its UTF-8 byte chunks, in order (a character may span two chunks)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = "".join(decoder.decode(chunk) for chunk in chunks)
    return text + decoder.decode(b"", final=True)
PY
cat > detect.py <<'PY'
"""Captures the released client (which decoded every chunk separately) showed corrupted."""

from streamclient.capture import read_chunks


def is_affected(path):
    for chunk in read_chunks(path):
        try:
            chunk.decode("utf-8")
        except UnicodeDecodeError:
            return True
    return False
PY
