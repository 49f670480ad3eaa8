import sys

from agentstream.client import read_capture, replay

events = read_capture(sys.argv[1])
fires = replay(events)
print(f"{len(events)} events, {len(fires)} reconnects" + "".join(f"\n  reconnect at {t}" for t in fires))
