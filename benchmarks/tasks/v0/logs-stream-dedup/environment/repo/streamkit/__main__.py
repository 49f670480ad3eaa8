import sys

from streamkit import assemble, read_events

print(assemble(read_events(sys.argv[1])))
