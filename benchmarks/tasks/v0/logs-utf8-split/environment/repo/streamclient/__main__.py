import sys

from streamclient import decode_chunks, read_chunks

print(decode_chunks(read_chunks(sys.argv[1])))
