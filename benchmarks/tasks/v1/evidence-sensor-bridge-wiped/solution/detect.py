"""Sensor readings a broker restart wiped from the bridge's queue (incident COLD-412, "readings missing from the
dashboard").

The brokers' logs (logs/broker, one file per node and day, in time order) follow each bridged message by queue id;
the `queued` line names the gateway's client id and MQTT message id, which the gateway's own `published mid=` line
(logs/gateways) ties to the reading. A message whose last POST to the ingest API was queued for a retry (503 or
500) and that was never forwarded, rejected or saved to disk (the fix: a stopping node saves its queue and
restores it when it starts) was lost if its node stopped (`caught SIGTERM`) after that attempt. 503s and 500s
retried later, resends with the dup flag, gateway reconnects, temperature excursions, 422s for sensor faults and
messages still queued when the week's logs end are not lost.
"""

import os
import re

LINE = re.compile(r"^\w{3} [ \d]\d \d\d:\d\d:\d\d (\S+) mqbridge\[\d+\]: (.*)$")
QUEUED = re.compile(r"^(\w+): queued from (\S+) mid=(\d+) ")
ATTEMPT = re.compile(r"^(\w+): POST \S+ via \S+ attempt=\d+ status=\d+ result=(\w+)")
SAVED = re.compile(r"^(\w+): saved to ")
READING = re.compile(r"\[gateway\] reading (\S+) sensor \S+ temp=\S+ published mid=(\d+)$")


def _files(folder):
    """{name before -d: [paths in day (and hour) order]}."""
    out = {}
    for name in os.listdir(folder):
        stem = name.rsplit(".", 1)[0]
        who, rest = stem.rsplit("-d", 1)
        key = tuple(int(x.lstrip("h")) for x in rest.split("-"))
        out.setdefault(who, []).append((key, os.path.join(folder, name)))
    return {who: [p for _, p in sorted(paths)] for who, paths in out.items()}


def _readings(log_dir):
    """{(gateway client id, mid): reading id} from the gateways' logs."""
    out = {}
    for gw, paths in _files(os.path.join(log_dir, "gateways")).items():
        for path in paths:
            with open(path) as f:
                for line in f:
                    m = READING.search(line.rstrip("\n"))
                    if m:
                        out[(gw, int(m.group(2)))] = m.group(1)
    return out


def lost_readings(log_dir):
    """The sorted reading ids (str) whose queued message a broker restart wiped."""
    source, last, done, saved, stops = {}, {}, set(), set(), {}
    for node, paths in _files(os.path.join(log_dir, "broker")).items():
        pos = 0
        stops[node] = []
        for path in paths:
            with open(path) as f:
                for raw in f:
                    pos += 1
                    m = LINE.match(raw.rstrip("\n"))
                    if not m:
                        continue
                    text = m.group(2)
                    if text.startswith("caught SIGTERM"):
                        stops[node].append(pos)
                        continue
                    mm = QUEUED.match(text)
                    if mm:
                        source[(node, mm.group(1))] = (mm.group(2), int(mm.group(3)))
                        continue
                    mm = SAVED.match(text)
                    if mm:
                        saved.add((node, mm.group(1)))
                        continue
                    mm = ATTEMPT.match(text)
                    if mm:
                        key = (node, mm.group(1))
                        if mm.group(2) == "queued":
                            last[key] = pos
                        else:
                            done.add(key)
    reading_of = _readings(log_dir)
    hurt = set()
    for key, pos in last.items():
        if key in done or key in saved or key not in source:
            continue
        if any(s > pos for s in stops[key[0]]) and source[key] in reading_of:
            hurt.add(reading_of[source[key]])
    return sorted(hurt)
