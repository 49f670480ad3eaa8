"""Deterministic captures for the logs-heartbeat-timeout task (also its environment/generate.py).

The released watchdog only counted `delta` events as signs of life, so during a long tool run (heartbeats only)
it dropped a live connection 30 s after the last delta. `make_session(rng, sid)` returns (capture, spurious):
spurious means some client reconnect happened while the server had sent something within the timeout.
"""

import json
import os
import random
import sys

TIMEOUT = 30_000
WORDS = "running the test suite now all green fixing the import then rerunning the build".split()


def fires(events, alive_types):
    server = [e for e in events if not e["type"].startswith("client_")]
    last, out = server[0]["ts"], []
    for e in server[1:]:
        while e["ts"] - last > TIMEOUT:
            last += TIMEOUT + 1
            out.append(last)
        if e["type"] in alive_types:
            last = e["ts"]
    return out


def spurious(capture):
    """True if some client_reconnect came while the server had sent an event within the timeout."""
    last_server = None
    for e in capture:
        if e["type"] == "client_reconnect" and last_server is not None and e["ts"] - last_server <= TIMEOUT:
            return True
        if not e["type"].startswith("client_"):
            last_server = e["ts"]
    return False


def server_events(rng, sid):
    t = rng.randint(1_700_000_000_000, 1_700_100_000_000)
    events = [{"type": "start", "session": sid, "ts": t}]
    for _ in range(rng.randint(2, 6)):
        for _ in range(rng.randint(3, 12)):
            t += rng.randint(40, 900)
            events.append({"type": "delta", "ts": t, "text": rng.choice(WORDS) + " "})
        phase = rng.random()
        if phase < 0.15:  # a tool run: heartbeats only
            end = t + rng.randint(12_000, 90_000)
            while t + 12_000 < end:
                t += rng.randint(8_500, 11_500)
                events.append({"type": "heartbeat", "ts": t})
            t = end
        elif phase < 0.21:  # a real network stall: nothing at all
            t += rng.randint(31_000, 70_000)
        t += rng.randint(40, 900)
        events.append({"type": "delta", "ts": t, "text": "done "})
    events.append({"type": "end", "ts": t + 50})
    return events


def make_session(rng, sid):
    events = server_events(rng, sid)
    markers = [{"type": "client_reconnect", "ts": f} for f in fires(events, {"start", "delta"})]
    capture = sorted(events + markers, key=lambda e: (e["ts"], e["type"].startswith("client_")))
    return capture, spurious(capture)


def write_captures(out_dir, seed, count):
    """Write count captures as out_dir/<sid>.jsonl; returns {sid: spurious}."""
    rng = random.Random(seed)
    os.makedirs(out_dir, exist_ok=True)
    labels = {}
    for i in range(count):
        sid = f"run{seed % 1000:03d}-{i:04d}"
        capture, labels[sid] = make_session(rng, sid)
        with open(os.path.join(out_dir, f"{sid}.jsonl"), "w") as f:
            f.writelines(json.dumps(e) + "\n" for e in capture)
    return labels


if __name__ == "__main__":
    write_captures(os.path.join(sys.argv[1], "logs"), seed=1234, count=250)
