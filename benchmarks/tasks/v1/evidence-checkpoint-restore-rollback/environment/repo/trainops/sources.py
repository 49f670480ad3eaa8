"""Readers of the trainer logs, the scheduler events and the checkpoint index (docs/log-formats.md)."""

import csv
import json
import os
import re
import time

LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) (\w+) \[(\w+)\] (.*)$")


def parse_time(stamp, millis="000"):
    """UTC seconds of a trainer log time stamp (`YYYY-MM-DD HH:MM:SS`, milliseconds apart)."""
    return time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S")) - time.timezone + int(millis) / 1000


def trainer_lines(log_dir, job):
    """(time, level, message) of every line of one job's trainer log."""
    with open(os.path.join(log_dir, "trainer", job + ".log"), encoding="utf-8") as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            if m:
                yield parse_time(m.group(1), m.group(2)), m.group(3), m.group(5)


def jobs(log_dir):
    return sorted(name[:-len(".log")] for name in os.listdir(os.path.join(log_dir, "trainer")))


def scheduler_events(log_dir):
    """Every scheduler event, once (the event bus delivers at least once), in time order."""
    seen = {}
    folder = os.path.join(log_dir, "scheduler")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    e = json.loads(line)
                    seen[(e["job"], e["ev"], e["ts"])] = e
    return sorted(seen.values(), key=lambda e: e["ts"])


def checkpoints(log_dir):
    """The checkpoint index: dicts with step and bytes as int, started/finished/deleted as float or None."""
    with open(os.path.join(log_dir, "checkpoints", "index.csv"), newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            for k in ("started", "finished", "deleted"):
                row[k] = float(row[k]) if row[k] else None
            row["step"], row["bytes"] = int(row["step"]), int(row["bytes"])
            yield row
