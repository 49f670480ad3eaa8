"""Length-prefixed JSON frames over a stream socket: the protocol between the host and the sandbox's guest process.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON. Byte strings (command
output, file bytes) travel as latin-1 text so every byte value survives the JSON round trip.
"""

import json
import struct

HEADER = struct.Struct(">I")
MAX_FRAME = 256 << 20


def send(sock, obj):
    """Write one JSON frame (blocking)."""
    data = json.dumps(obj, separators=(",", ":")).encode()
    if len(data) > MAX_FRAME:
        raise ValueError(f"frame of {len(data)} bytes exceeds MAX_FRAME={MAX_FRAME}")
    sock.sendall(HEADER.pack(len(data)) + data)


def recv(sock):
    """Read one JSON frame (blocking); None on a clean end of stream."""
    header = _read_exact(sock, HEADER.size)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    if size > MAX_FRAME:
        raise ValueError(f"peer announced a frame of {size} bytes; expected at most MAX_FRAME={MAX_FRAME}")
    body = _read_exact(sock, size)
    if body is None:
        raise ConnectionError(f"stream ended inside a frame of {size} bytes")
    return json.loads(body)


def _read_exact(sock, size):
    """Read exactly `size` bytes; None if the stream ends before the first byte."""
    chunks, got = [], 0
    while got < size:
        chunk = sock.recv(min(size - got, 1 << 20))
        if not chunk:
            if got == 0:
                return None
            raise ConnectionError(f"stream ended after {got} of {size} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
