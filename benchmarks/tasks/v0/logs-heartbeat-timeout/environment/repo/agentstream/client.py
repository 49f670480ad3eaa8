"""Replaying a capture through the client's connection logic."""

import json

from agentstream.watchdog import TIMEOUT_MS, Watchdog


def read_capture(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def replay(events, timeout_ms=TIMEOUT_MS):
    """Times (ms) at which the client drops and re-opens the connection, for the server events of a capture."""
    server = [e for e in events if not e["type"].startswith("client_")]
    dog = Watchdog(timeout_ms, start_ms=server[0]["ts"])
    fires = []
    for event in server[1:]:
        while dog.expired(event["ts"]):
            fire = dog.last + timeout_ms + 1
            fires.append(fire)
            dog.reset(fire)
        dog.observe(event)
    return fires
