"""A week of video uploads: the upload workers' logs, the job shovels' logs and the transcoding farm API's log.

    python generate.py REPO     builds REPO from its pinned pika release and history (sdist_repo.py, a copy of the
                                suite's shared script next to this file), then writes REPO/logs/ (seed 13, 30,000
                                uploads: ≈ 1,030 files). Stdlib only.

Three sources, joined by the upload worker's name and its publish tag (the worker names the video whose transcode
job it published under that tag; the shovel queues the job under a queue id naming worker and tag) and by video id
(the farm API's JSON log):
  logs/uploaders/UP-dDAY-hHOUR.log  the media team's upload workers (pika + the team's uploader, Python logging:
                                    `YYYY-MM-DD HH:MM:SS,mmm LEVEL [logger] message`): each video stored and its
                                    transcode job published with publisher confirms, pika's publish/confirm/heartbeat
                                    debug lines, republishes when a confirm is late, reconnects when a shovel node
                                    restarts, high-bitrate warnings; shipped at least once
  logs/shovel/NODE-dDAY.log         the media platform's job shovels (syslog): publishes received and confirmed, the
                                    shovel's retry queue (`queued`, each POST to the farm API with
                                    `result=submitted`, `queued retry_in=`, `rejected`, `removed`), stop/start; after
                                    the fix a stopping node spills its retry queue to disk and reloads it on start
  logs/farm/HOST-dDAY-hHOUR.jsonl   the transcoding farm API's JSON log: `job.accepted`, `job.rejected` (an
                                    unreadable source, answered 422), `request.failed` (503 farm at capacity, 500
                                    database errors), health checks

The bug (in the media platform's shovel deployment, in no repository; fixed at a point of the week): the shovel
confirms a publish as soon as it has queued the job, and a node restart (deploys, every few hours) wiped its
in-memory retry queue, so a job the farm API had answered 503 or 500 and that was not yet retried was lost: the
upload worker had its confirm and forgot the job, no rendition was ever made. After the fix the node spills its
queue before it stops and reloads it when it starts. A video is hurt when the restart wiped its job. Harmless
anomalies: 503s (capacity) and 500s retried and submitted, republishes of a late confirm, upload worker reconnects
at a node's restart, high-bitrate sources, queues spilled and reloaded (after the fix), 422s for unreadable
sources, jobs still queued when the week ends, repeated upload worker lines.

The verifier's setup.py imports this file (a copy in tests/) to draw fresh weeks with other seeds and fix times;
`write_logs` returns the true labels ({video id: hurt}); given a dict as `kinds`, it also fills in the
harmless anomaly kinds drawn ({kind: videos}, or (lines, all lines, unit) for the repeated lines) for
benchmarks/evidence_stats.py.
"""

from __future__ import annotations

import bisect
import collections
import datetime
import json
import os
import random
import sys

START = 1_702_252_800  # 2023-12-11T00:00:00Z
WEEK = 7 * 86400
UPLOADERS = ("up-fra1", "up-fra2", "up-ams1", "up-ams2")
FARM = ("farm1", "farm2")
NODES = ("shovel-a", "shovel-b", "shovel-c")
URL = "https://farm.example/v2/jobs"
PROFILES = ("1080p", "720p", "480p", "2160p")
STATS = collections.Counter()  # what the last write_logs drew, by kind (for the docs' measurements)
MET = {}  # what the last write_logs drew, by kind: the units that met it (for benchmarks/evidence_stats.py)
LINES = ("repeated upload worker lines", "upload worker lines")  # the repeated lines and all lines of their source


def _tally(kind, unit):
    STATS[kind] += 1
    MET.setdefault(kind, set()).add(unit)


def lstamp(t: float) -> str:
    """A Python logging time, `2023-12-11 00:00:01,123`."""
    d = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    return d.strftime("%Y-%m-%d %H:%M:%S") + ",%03d" % (d.microsecond // 1000)


def syslog(t: float) -> str:
    """A syslog line's time, `Dec 11 00:00:01` (the week's days are all two-digit)."""
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%b %d %H:%M:%S")


def jstamp(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _qid(rng):
    return "".join(rng.choice("0123456789ABCDEF") for _ in range(12))


class Week:
    def __init__(self, rng):
        self.rng, self.up, self.shovel, self.farm = rng, [], [], []
        self.pids = {n: rng.randrange(900, 1500) for n in NODES}

    def ulog(self, t, up, level, logger, text):
        self.up.append((t, up, "%s %s [%s] %s" % (lstamp(t), level, logger, text)))

    def slog(self, t, node, text):
        self.shovel.append((t, node, "%s %s jobshovel[%d]: %s" % (syslog(t), node, self.pids[node], text)))

    def jlog(self, t, host, event, level="info", **fields):
        self.farm.append((t, host, dict({"ts": jstamp(t), "level": level, "host": host, "event": event},
                                          **fields)))


def write_logs(folder: str, seed: int = 13, count: int = 30_000, fixed_at: float | None = None,
               kinds: dict | None = None) -> dict:
    """Write a week under folder/{uploaders,shovel,farm}; {video id: its queued job wiped by a restart}.
    fixed_at (UTC seconds): from when a stopping node spills its retry queue (default: day 2 or 3).
    kinds: filled with the harmless anomaly kinds drawn (module docstring)."""
    rng = random.Random(seed)
    STATS.clear()
    MET.clear()
    if fixed_at is None:
        fixed_at = START + WEEK * rng.uniform(0.28, 0.4)
    w = Week(rng)
    restarts = {n: [] for n in NODES}
    for n in NODES:
        t = START + rng.uniform(0, 3600)
        while t < START + WEEK:
            restarts[n].append(t)
            t += rng.uniform(1.2, 3.0) * 3600
    # each upload worker holds one connection, to a node it keeps until that node restarts
    events = sorted((t, n) for n in NODES for t in restarts[n])
    conn = {}  # upload worker -> [(from t, node)]
    for u in UPLOADERS:
        node = rng.choice(NODES)
        conn[u] = [(START - 1.0, node)]
        w.ulog(START + rng.uniform(0, 5), u, "INFO", "uploader", "connected to %s:5671 (channel 1, confirms on)" % node)
        for t, n in events:
            if n == node:
                node = rng.choice(NODES)
                back = t + rng.uniform(0.5, 6)
                conn[u].append((back, node))
                w.ulog(t + rng.uniform(0.01, 0.3), u, "WARNING", "uploader", "connection to %s lost: StreamLostError"
                       ": ('Transport indicated EOF',); reconnecting" % n)
                w.ulog(back, u, "INFO", "uploader", "connected to %s:5671 (channel 1, confirms on)" % node)
                STATS["upload worker reconnects"] += 1
        t = START + rng.uniform(0, 60)
        while t < START + WEEK:  # AMQP heartbeats
            w.ulog(t, u, "DEBUG", "pika.heartbeat", "Sending heartbeat frame")
            w.ulog(t + rng.uniform(0.01, 0.2), u, "DEBUG", "pika.heartbeat", "Received heartbeat frame")
            t += 60
    for h in FARM:  # health checks
        t = START + rng.uniform(0, 30)
        while t < START + WEEK:
            w.jlog(t, h, "request.done", method="GET", path="/healthz", http_status=200,
                   duration_ms=rng.randint(1, 9))
            t += 30
    channels = {u: ["ch-%05d" % rng.randrange(100_000) for _ in range(40)] for u in UPLOADERS}
    uploads, labels = [], {}
    for _ in range(count):
        t = START + rng.uniform(0, WEEK - 30)
        u = rng.choice(UPLOADERS)
        uploads.append((t, u, rng.choice(channels[u])))
    uploads.sort()
    tags = {u: 0 for u in UPLOADERS}
    for t, u, channel in uploads:
        vid = "vid_%s" % "".join(rng.choice("0123456789abcdefghijklmnopqrstuvwxyz") for _ in range(14))
        labels[vid] = False
        tags[u] += 1
        tag = tags[u]
        node = conn[u][bisect.bisect_right(conn[u], (t, "~")) - 1][1]
        broken = rng.random() < 0.03
        profile = rng.choice(PROFILES)
        kbps = rng.randint(2_000, 60_000) if rng.random() < 0.25 else rng.randint(1_500, 12_000)
        key = "transcode.%s" % profile
        size = 700 + rng.randrange(200)
        w.ulog(t, u, "INFO", "uploader", "video %s channel %s %s %dkbps stored, job published tag=%d" % (
            vid, channel, profile, kbps, tag))
        if kbps > 40_000:
            w.ulog(t + 0.001, u, "WARNING", "uploader", "video %s source bitrate %dkbps above 40000kbps: slow "
                   "transcode expected" % (vid, kbps))
            _tally("high-bitrate sources", vid)
        w.ulog(t + 0.002, u, "DEBUG", "pika.channel", "Publishing to exchange 'media' routing_key='%s' "
               "(delivery_tag=%d, %d bytes)" % (key, tag, size))
        r = t + rng.uniform(0.01, 0.2)
        w.slog(r, node, "publish from %s on channel 1 (delivery_tag=%d, %s, %d bytes)" % (u, tag, key, size))
        qid = _qid(rng)
        w.slog(r + 0.001, node, "%s: queued from %s tag=%d key=%s" % (qid, u, tag, key))
        if rng.random() < 0.1:  # a late confirm: the uploader republishes, the shovel does not queue it again
            d = r + rng.uniform(10, 12)
            w.ulog(d - 0.05, u, "DEBUG", "pika.channel", "Republishing to exchange 'media' routing_key='%s' "
                   "(delivery_tag=%d, %d bytes): confirm overdue" % (key, tag, size))
            w.slog(d, node, "publish from %s on channel 1 (delivery_tag=%d, %s, %d bytes, republished)"
                   % (u, tag, key, size))
            w.slog(d + 0.001, node, "%s tag=%d: duplicate of %s, not queued again" % (u, tag, qid))
            ack = d + 0.002
            _tally("republishes", vid)
        else:
            ack = r + 0.002
        w.slog(ack, node, "confirm to %s (Basic.Ack delivery_tag=%d)" % (u, tag))
        w.ulog(ack + rng.uniform(0.01, 0.2), u, "DEBUG", "pika.channel", "Received <Basic.Ack(['delivery_tag=%d', "
               "'multiple=False'])>" % tag)
        s = r + rng.uniform(0.05, 0.5)
        attempt = 0
        seen = set()
        while True:
            if s >= START + WEEK:
                _tally("queued at the week's end", vid)
                break
            attempt += 1
            host = rng.choice(FARM)
            head = "%s: POST %s via %s attempt=%d" % (qid, URL, host, attempt)
            if broken:
                w.jlog(s - 0.01, host, "job.rejected", level="warning", video_id=vid, channel=channel,
                       profile=profile, http_status=422, reason="source unreadable (ffprobe: moov atom not found)")
                w.slog(s, node, head + " status=422 result=rejected")
                w.slog(s + 0.01, node, "%s: removed" % qid)
                _tally("422 unreadable sources", vid)
                break
            x = rng.random()
            fail = None
            if x < (0.08 if attempt == 1 else 0.03):
                fail = 500
            elif x < (0.21 if attempt == 1 else 0.06):
                fail = 503
            if fail:
                if fail == 500:
                    w.jlog(s - 0.01, host, "request.failed", level="error", path="/v2/jobs", http_status=500,
                           video_id=vid, error="psycopg2.OperationalError: server closed the connection "
                           "unexpectedly")
                    seen.add("500 then submitted")
                else:
                    w.jlog(s - 0.01, host, "request.failed", level="warning", path="/v2/jobs", http_status=503,
                           video_id=vid, error="farm at capacity: try later")
                    seen.add("503 then submitted")
                wait = rng.uniform(120, 2400)
                w.slog(s, node, head + " status=%d result=queued retry_in=%ds" % (fail, wait))
                nxt = s + wait
                k = bisect.bisect_right(restarts[node], s)
                cut = restarts[node][k] if k < len(restarts[node]) else None
                if cut is not None and cut < nxt:
                    if cut < fixed_at:  # the bug: the restart wipes the shovel's retry queue
                        labels[vid] = True
                        _tally("hurt", vid)
                        break
                    w.slog(cut - 0.3, node, "%s: spilled to /var/lib/jobshovel/retry.db" % qid)  # the fix
                    w.slog(cut + rng.uniform(4.1, 5), node, "%s: reloaded from /var/lib/jobshovel/retry.db" % qid)
                    _tally("spilled and reloaded at a restart", vid)
                    nxt = max(nxt, cut + 6)
                s = nxt
                continue
            w.jlog(s - 0.01, host, "job.accepted", video_id=vid, channel=channel, profile=profile,
                   job_id="job-%d" % rng.randrange(10**9), http_status=201)
            w.slog(s, node, head + " status=201 result=submitted")
            w.slog(s + 0.01, node, "%s: removed" % qid)
            for k in seen:
                _tally(k, vid)
            break
    for n in NODES:
        for cut in restarts[n]:
            w.slog(cut, n, "caught SIGTERM, stopping")
            w.pids[n] = rng.randrange(900, 30000)
            w.slog(cut + rng.uniform(1.5, 4), n, "jobshovel 2.4.1 started, consuming transcode.*, farm %s" % URL)
    write_folder(folder, w.up, w.shovel, w.farm, rng)
    if kinds is not None:
        kinds.update({name: len(units & labels.keys()) for name, units in MET.items() if name != "hurt"})
        kinds[LINES[0]] = (STATS[LINES[0]], STATS[LINES[1]], LINES[1])
    return labels


def write_folder(folder: str, up: list, shovel: list, farm: list, rng: random.Random | None = None):
    """Write (t, upload worker, text) uploader lines, (t, node, text) shovel lines and (t, host, record) farm records
    in the production layout under folder (records outside the week are dropped, as the week's export would)."""
    rng = rng or random.Random(0)
    for sub in ("uploaders", "shovel", "farm"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    files = collections.defaultdict(list)
    for t, u, text in up:
        h = int((t - START) // 3600)
        if 0 <= h < 168:
            files[("uploaders", "%s-d%d-h%02d.log" % (u, h // 24, h % 24))].append((t, text))
    for t, n, text in shovel:
        d = int((t - START) // 86400)
        if 0 <= d < 7:
            files[("shovel", "%s-d%d.log" % (n, d))].append((t, text))
    for t, host, rec in farm:
        h = int((t - START) // 3600)
        if 0 <= h < 168:
            files[("farm", "%s-d%d-h%02d.jsonl" % (host, h // 24, h % 24))].append((t, json.dumps(
                rec, separators=(",", ":"))))
    for (sub, name), group in sorted(files.items()):
        group.sort(key=lambda x: x[0])
        if sub == "uploaders":  # at-least-once shipping
            n = len(group)
            group = [x for x in group for _ in range(2 if rng.random() < 0.03 else 1)]
            STATS["repeated upload worker lines"] += len(group) - n
            STATS["upload worker lines"] += len(group)
        with open(os.path.join(folder, sub, name), "w") as f:
            f.writelines(text + "\n" for _, text in group)


def _build(repo: str) -> None:
    """The pinned release and its history (the shared sdist_repo.py, a byte-identical copy next to this file)."""
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("sdist_repo", os.path.join(here, "sdist_repo.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build(repo)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: generate.py REPO")
    _build(sys.argv[1])
    write_logs(os.path.join(sys.argv[1], "logs"))
