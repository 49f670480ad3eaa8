"""Probes of logs-stream-dedup: assembled replies and the detector's answers (bench/verdict_runner.py; the
sessions come from the runner's setup.py)."""

import json
import os


def probe_chunks_sharing_a_timestamp(ctx):
    events = [{"type": "chunk", "seq": 0, "ts": 5, "delta": "a"}, {"type": "chunk", "seq": 1, "ts": 5, "delta": "b"},
              {"type": "chunk", "seq": 2, "ts": 9, "delta": "c"}]
    return ctx.load("streamkit").assemble(events)


def probe_resent_chunks_once(ctx):
    events = [{"type": "chunk", "seq": 0, "ts": 1, "delta": "a"}, {"type": "chunk", "seq": 1, "ts": 2, "delta": "b"},
              {"type": "reconnect", "ts": 50}, {"type": "chunk", "seq": 1, "ts": 60, "delta": "b"},
              {"type": "chunk", "seq": 2, "ts": 61, "delta": "c"}]
    return ctx.load("streamkit").assemble(events)


def probe_generated_sessions_match_the_protocol(ctx):
    assemble = ctx.load("streamkit").assemble
    with open(ctx.fixture["streams"]) as f:
        return [assemble(events) for events in json.load(f)]


def probe_detector_on_fresh_sessions(ctx):
    detect = ctx.load("detect")
    return [bool(detect.is_affected(path)) for path in ctx.fixture["sessions"]]


def probe_repository_logs_still_load(ctx):
    streamkit = ctx.load("streamkit")
    logs = sorted(os.listdir(ctx.path("logs")))
    return [len(logs) >= 100, bool(streamkit.assemble(streamkit.read_events(ctx.path("logs", logs[0]))))]
