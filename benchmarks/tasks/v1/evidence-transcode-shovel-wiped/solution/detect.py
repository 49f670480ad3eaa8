"""Videos whose transcode job a shovel restart wiped from its retry queue (incident MEDIA-517, "uploads stuck
without renditions").

The shovels' logs (logs/shovel, one file per node and day, in time order) follow each job by queue id; the `queued`
line names the upload worker and its publish tag, which the worker's own `job published tag=` line
(logs/uploaders) ties to the video. A job whose last POST to the farm API was queued for a retry (503 or 500) and
that was never submitted, rejected or spilled to disk (the fix: a stopping node spills its retry queue and reloads
it when it starts) was lost if its node stopped (`caught SIGTERM`) after that attempt. 503s and 500s retried later,
republishes of a late confirm, upload worker reconnects, high-bitrate sources, 422s for unreadable sources and jobs
still queued when the week's logs end are not lost.
"""

import os
import re

LINE = re.compile(r"^\w{3} [ \d]\d \d\d:\d\d:\d\d (\S+) jobshovel\[\d+\]: (.*)$")
QUEUED = re.compile(r"^(\w+): queued from (\S+) tag=(\d+) ")
ATTEMPT = re.compile(r"^(\w+): POST \S+ via \S+ attempt=\d+ status=\d+ result=(\w+)")
SPILLED = re.compile(r"^(\w+): spilled to ")
VIDEO = re.compile(r"\[uploader\] video (\S+) channel \S+ \S+ \d+kbps stored, job published tag=(\d+)$")


def _files(folder):
    """{name before -d: [paths in day (and hour) order]}."""
    out = {}
    for name in os.listdir(folder):
        stem = name.rsplit(".", 1)[0]
        who, rest = stem.rsplit("-d", 1)
        key = tuple(int(x.lstrip("h")) for x in rest.split("-"))
        out.setdefault(who, []).append((key, os.path.join(folder, name)))
    return {who: [p for _, p in sorted(paths)] for who, paths in out.items()}


def _videos(log_dir):
    """{(upload worker, tag): video id} from the upload workers' logs."""
    out = {}
    for up, paths in _files(os.path.join(log_dir, "uploaders")).items():
        for path in paths:
            with open(path) as f:
                for line in f:
                    m = VIDEO.search(line.rstrip("\n"))
                    if m:
                        out[(up, int(m.group(2)))] = m.group(1)
    return out


def lost_videos(log_dir):
    """The sorted video ids (str) whose queued transcode job a shovel restart wiped."""
    source, last, done, spilled, stops = {}, {}, set(), set(), {}
    for node, paths in _files(os.path.join(log_dir, "shovel")).items():
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
                    mm = SPILLED.match(text)
                    if mm:
                        spilled.add((node, mm.group(1)))
                        continue
                    mm = ATTEMPT.match(text)
                    if mm:
                        key = (node, mm.group(1))
                        if mm.group(2) == "queued":
                            last[key] = pos
                        else:
                            done.add(key)
    video_of = _videos(log_dir)
    hurt = set()
    for key, pos in last.items():
        if key in done or key in spilled or key not in source:
            continue
        if any(s > pos for s in stops[key[0]]) and source[key] in video_of:
            hurt.add(video_of[source[key]])
    return sorted(hurt)
