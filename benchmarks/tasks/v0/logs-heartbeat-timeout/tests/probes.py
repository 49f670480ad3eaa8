"""Probes of logs-heartbeat-timeout: the watchdog, replays and the detector's answers (bench/verdict_runner.py;
the captures come from the runner's setup.py)."""

import json


def probe_heartbeat_keeps_it_alive(ctx):
    dog = ctx.load("agentstream").Watchdog(30_000, start_ms=0)
    out = []
    for t in range(10_000, 120_001, 10_000):
        dog.observe({"type": "heartbeat", "ts": t})
        out.append(bool(dog.expired(t + 30_000)))
    return out + [bool(dog.expired(150_001))]


def probe_boundary(ctx):
    dog = ctx.load("agentstream").Watchdog(1000, start_ms=0)
    return [bool(dog.expired(1000)), bool(dog.expired(1001))]


def probe_replay_matches_a_correct_client(ctx):
    replay = ctx.load("agentstream").replay
    with open(ctx.fixture["sessions"]) as f:
        return [replay(capture) for capture in json.load(f)]


def probe_detector_on_fresh_captures(ctx):
    detect = ctx.load("detect")
    return [bool(detect.is_spurious(path)) for path in ctx.fixture["captures"]]
