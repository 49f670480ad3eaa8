from streamclient.capture import read_chunks
from streamclient.decoder import decode_chunks

__all__ = ["decode_chunks", "read_chunks"]
