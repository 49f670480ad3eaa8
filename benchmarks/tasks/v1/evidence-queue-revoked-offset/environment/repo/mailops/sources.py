"""Readers of the three sources (docs/log-formats.md)."""

import json
import os


def _files(log_dir, sub):
    folder = os.path.join(log_dir, sub)
    return [os.path.join(folder, name) for name in sorted(os.listdir(folder))]


def producer_records(log_dir):
    """Every producer send attempt under log_dir/producer."""
    for path in _files(log_dir, "producer"):
        with open(path, encoding="utf-8") as f:
            yield from (json.loads(line) for line in f if line.strip())


def broker_events(log_dir):
    """Every broker event under log_dir/broker."""
    for path in _files(log_dir, "broker"):
        with open(path, encoding="utf-8") as f:
            yield from (json.loads(line) for line in f if line.strip())


def parse_consumer_line(line):
    """{"time", "level", "consumer", "event", **fields} of one consumer log line (field values as text)."""
    stamp, level, consumer, event, *rest = line.split()
    out = dict(kv.split("=", 1) for kv in rest)
    out.update(time=stamp, level=level, consumer=consumer, event=event)
    return out


def consumer_events(log_dir, events=None):
    """Every consumer log line under log_dir/consumer, optionally only some events."""
    for path in _files(log_dir, "consumer"):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    e = parse_consumer_line(line)
                    if events is None or e["event"] in events:
                        yield e
