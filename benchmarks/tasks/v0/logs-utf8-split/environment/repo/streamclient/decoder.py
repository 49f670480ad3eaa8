"""Turning streamed bytes into text."""


def decode_chunk(chunk):
    return chunk.decode("utf-8", errors="replace")


def decode_chunks(chunks):
    """The response text from its UTF-8 byte chunks, in order."""
    return "".join(decode_chunk(chunk) for chunk in chunks)
