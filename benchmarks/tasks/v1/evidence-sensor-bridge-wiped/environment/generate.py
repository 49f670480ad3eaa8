"""A week of cold-room sensor readings: the gateways' logs, the MQTT brokers' bridge logs and the ingest API's log.

    python generate.py REPO     builds REPO from its pinned paho-mqtt release and history (sdist_repo.py, a copy of
                                the suite's shared script next to this file), then writes REPO/logs/ (seed 13,
                                30,000 readings: ≈ 1,030 files). Stdlib only.

Three sources, joined by the gateway's MQTT client id and message id (the gateway names the reading it published
under that mid; the broker's bridge queues the message under a queue id naming client and mid) and by reading id
(the ingest API's JSON log):
  logs/gateways/GW-dDAY-hHOUR.log  the site gateways (paho-mqtt + the team's gateway daemon, Python logging:
                                   `YYYY-MM-DD HH:MM:SS,mmm LEVEL [logger] message`): each reading published (QoS 1)
                                   and its PUBACK, paho's PUBLISH/PUBACK/PINGREQ debug lines, resends with the dup
                                   flag when a PUBACK is late, reconnects when the broker node restarts,
                                   temperature excursion warnings; shipped at least once
  logs/broker/NODE-dDAY.log        the IoT platform's brokers (syslog): PUBLISH received and acknowledged, the
                                   bridge's queue (`queued`, each POST to the ingest API with `result=forwarded`,
                                   `queued retry_in=`, `rejected`, `removed`), stop/start; after the fix a stopping
                                   node saves its bridge queue to disk and restores it when it starts
  logs/ingest/HOST-dDAY-hHOUR.jsonl the ingest API's JSON log: `reading.stored`, `reading.rejected` (a sensor fault,
                                   answered 422), `request.failed` (503 backpressure, 500 database errors), health
                                   checks

The bug (in the IoT platform's broker deployment, in no repository; fixed at a point of the week): the broker
acknowledges a QoS 1 PUBLISH as soon as its bridge has queued it, and a node restart (deploys, every few hours) wiped
the bridge's in-memory queue, so a reading the ingest API had answered 503 or 500 and that was not yet retried was
lost: the gateway had its PUBACK and dropped it from its buffer, the reading never reached the store. After the fix
the node saves its queue before it stops and restores it when it starts. A reading is hurt when the restart wiped
it. Harmless anomalies: 503s (backpressure) and 500s retried and forwarded, resends with the dup flag (a late
PUBACK), gateway reconnects at a node's restart, temperature excursions, queues saved and restored (after the fix),
422s for sensor faults, readings still queued when the week ends, repeated gateway lines.

The verifier's setup.py imports this file (a copy in tests/) to draw fresh weeks with other seeds and fix times;
`write_logs` returns the true labels ({reading id: hurt}); given a dict as `kinds`, it also fills in the
harmless anomaly kinds drawn ({kind: readings}, or (lines, all lines, unit) for the repeated lines) for
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
GATEWAYS = ("gw-wh1", "gw-wh2", "gw-dc3", "gw-dc4")
INGEST = ("ingest1", "ingest2")
NODES = ("mq-a", "mq-b", "mq-c")
URL = "https://ingest.example/v1/readings"
STATS = collections.Counter()  # what the last write_logs drew, by kind (for the docs' measurements)
MET = {}  # what the last write_logs drew, by kind: the units that met it (for benchmarks/evidence_stats.py)
LINES = ("repeated gateway lines", "gateway lines")  # the repeated lines and all lines of their source


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
        self.rng, self.gw, self.broker, self.ingest = rng, [], [], []
        self.pids = {n: rng.randrange(900, 1500) for n in NODES}

    def glog(self, t, gw, level, logger, text):
        self.gw.append((t, gw, "%s %s [%s] %s" % (lstamp(t), level, logger, text)))

    def blog(self, t, node, text):
        self.broker.append((t, node, "%s %s mqbridge[%d]: %s" % (syslog(t), node, self.pids[node], text)))

    def jlog(self, t, host, event, level="info", **fields):
        self.ingest.append((t, host, dict({"ts": jstamp(t), "level": level, "host": host, "event": event},
                                          **fields)))


def write_logs(folder: str, seed: int = 13, count: int = 30_000, fixed_at: float | None = None,
               kinds: dict | None = None) -> dict:
    """Write a week under folder/{gateways,broker,ingest}; {reading id: its queued message wiped by a restart}.
    fixed_at (UTC seconds): from when a stopping node saves its bridge queue (default: day 2 or 3).
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
    # each gateway holds one connection, to a node it keeps until that node restarts
    events = sorted((t, n) for n in NODES for t in restarts[n])
    conn = {}  # gateway -> [(from t, node)]
    for g in GATEWAYS:
        node = rng.choice(NODES)
        conn[g] = [(START - 1.0, node)]
        w.glog(START + rng.uniform(0, 5), g, "INFO", "gateway", "connected to %s:8883 (session present: 0)" % node)
        for t, n in events:
            if n == node:
                node = rng.choice(NODES)
                back = t + rng.uniform(0.5, 6)
                conn[g].append((back, node))
                w.glog(t + rng.uniform(0.01, 0.3), g, "WARNING", "gateway", "connection to %s lost (rc=7); "
                       "reconnecting" % n)
                w.glog(back, g, "INFO", "gateway", "connected to %s:8883 (session present: 0)" % node)
                STATS["gateway reconnects"] += 1
        t = START + rng.uniform(0, 60)
        while t < START + WEEK:  # keepalive pings
            w.glog(t, g, "DEBUG", "paho.mqtt.client", "Sending PINGREQ")
            w.glog(t + rng.uniform(0.01, 0.2), g, "DEBUG", "paho.mqtt.client", "Received PINGRESP")
            t += 60
    for h in INGEST:  # health checks
        t = START + rng.uniform(0, 30)
        while t < START + WEEK:
            w.jlog(t, h, "request.done", method="GET", path="/healthz", http_status=200,
                   duration_ms=rng.randint(1, 9))
            t += 30
    sensors = {g: ["t-%04d" % rng.randrange(10_000) for _ in range(40)] for g in GATEWAYS}
    readings, labels = [], {}
    for _ in range(count):
        t = START + rng.uniform(0, WEEK - 30)
        g = rng.choice(GATEWAYS)
        readings.append((t, g, rng.choice(sensors[g])))
    readings.sort()
    mids = {g: 0 for g in GATEWAYS}
    for t, g, sensor in readings:
        rid = "rd_%s" % "".join(rng.choice("0123456789abcdefghijklmnopqrstuvwxyz") for _ in range(16))
        labels[rid] = False
        mids[g] += 1
        mid = mids[g]
        node = conn[g][bisect.bisect_right(conn[g], (t, "~")) - 1][1]
        fault = rng.random() < 0.03
        temp = -327.7 if fault else round(rng.gauss(-19.0, 1.6), 1)
        topic = "cold/%s/%s/temp" % (g[3:], sensor)
        size = 60 + rng.randrange(20)
        w.glog(t, g, "INFO", "gateway", "reading %s sensor %s temp=%.1fC published mid=%d" % (rid, sensor, temp, mid))
        if not fault and temp > -17.0:
            w.glog(t + 0.001, g, "WARNING", "gateway", "sensor %s above -17.0C (%.1fC): excursion alarm raised"
                   % (sensor, temp))
            _tally("temperature excursions", rid)
        w.glog(t + 0.002, g, "DEBUG", "paho.mqtt.client", "Sending PUBLISH (d0, q1, r0, m%d), 'b'%s'', ... (%d "
               "bytes)" % (mid, topic, size))
        r = t + rng.uniform(0.01, 0.2)
        w.blog(r, node, "Received PUBLISH from %s (d0, q1, r0, m%d, '%s', ... (%d bytes))" % (g, mid, topic, size))
        qid = _qid(rng)
        w.blog(r + 0.001, node, "%s: queued from %s mid=%d topic=%s" % (qid, g, mid, topic))
        if rng.random() < 0.1:  # a late PUBACK: paho resends with the dup flag, the broker does not queue it again
            d = r + rng.uniform(10, 12)
            w.glog(d - 0.05, g, "DEBUG", "paho.mqtt.client", "Sending PUBLISH (d1, q1, r0, m%d), 'b'%s'', ... (%d "
                   "bytes)" % (mid, topic, size))
            w.blog(d, node, "Received PUBLISH from %s (d1, q1, r0, m%d, '%s', ... (%d bytes))" % (g, mid, topic,
                                                                                                   size))
            w.blog(d + 0.001, node, "%s mid=%d: duplicate of %s, not queued again" % (g, mid, qid))
            ack = d + 0.002
            _tally("dup resends", rid)
        else:
            ack = r + 0.002
        w.blog(ack, node, "Sending PUBACK to %s (m%d, rc0)" % (g, mid))
        w.glog(ack + rng.uniform(0.01, 0.2), g, "DEBUG", "paho.mqtt.client", "Received PUBACK (Mid: %d)" % mid)
        s = r + rng.uniform(0.05, 0.5)
        attempt = 0
        seen = set()
        while True:
            if s >= START + WEEK:
                _tally("queued at the week's end", rid)
                break
            attempt += 1
            host = rng.choice(INGEST)
            head = "%s: POST %s via %s attempt=%d" % (qid, URL, host, attempt)
            if fault:
                w.jlog(s - 0.01, host, "reading.rejected", level="warning", reading_id=rid, sensor=sensor,
                       site=g[3:], temp_c=temp, http_status=422, reason="out of range (sensor fault)")
                w.blog(s, node, head + " status=422 result=rejected")
                w.blog(s + 0.01, node, "%s: removed" % qid)
                _tally("422 sensor faults", rid)
                break
            x = rng.random()
            fail = None
            if x < (0.08 if attempt == 1 else 0.03):
                fail = 500
            elif x < (0.21 if attempt == 1 else 0.06):
                fail = 503
            if fail:
                if fail == 500:
                    w.jlog(s - 0.01, host, "request.failed", level="error", path="/v1/readings", http_status=500,
                           reading_id=rid, error="psycopg2.OperationalError: server closed the connection "
                           "unexpectedly")
                    seen.add("500 then forwarded")
                else:
                    w.jlog(s - 0.01, host, "request.failed", level="warning", path="/v1/readings", http_status=503,
                           reading_id=rid, error="backpressure: write queue full")
                    seen.add("503 then forwarded")
                wait = rng.uniform(120, 2400)
                w.blog(s, node, head + " status=%d result=queued retry_in=%ds" % (fail, wait))
                nxt = s + wait
                k = bisect.bisect_right(restarts[node], s)
                cut = restarts[node][k] if k < len(restarts[node]) else None
                if cut is not None and cut < nxt:
                    if cut < fixed_at:  # the bug: the restart wipes the bridge's queue
                        labels[rid] = True
                        _tally("hurt", rid)
                        break
                    w.blog(cut - 0.3, node, "%s: saved to /var/lib/mqbridge/queue.db" % qid)  # the fix
                    w.blog(cut + rng.uniform(4.1, 5), node, "%s: restored from /var/lib/mqbridge/queue.db" % qid)
                    _tally("saved and restored at a restart", rid)
                    nxt = max(nxt, cut + 6)
                s = nxt
                continue
            w.jlog(s - 0.01, host, "reading.stored", reading_id=rid, sensor=sensor, site=g[3:], temp_c=temp,
                   http_status=201)
            w.blog(s, node, head + " status=201 result=forwarded")
            w.blog(s + 0.01, node, "%s: removed" % qid)
            for k in seen:
                _tally(k, rid)
            break
    for n in NODES:
        for cut in restarts[n]:
            w.blog(cut, n, "caught SIGTERM, stopping")
            w.pids[n] = rng.randrange(900, 30000)
            w.blog(cut + rng.uniform(1.5, 4), n, "mqbridge 3.2.0 started, listening on :8883, bridge to %s" % URL)
    write_folder(folder, w.gw, w.broker, w.ingest, rng)
    if kinds is not None:
        kinds.update({name: len(units & labels.keys()) for name, units in MET.items() if name != "hurt"})
        kinds[LINES[0]] = (STATS[LINES[0]], STATS[LINES[1]], LINES[1])
    return labels


def write_folder(folder: str, gw: list, broker: list, ingest: list, rng: random.Random | None = None):
    """Write (t, gateway, text) gateway lines, (t, node, text) broker lines and (t, host, record) ingest records in
    the production layout under folder (records outside the week are dropped, as the week's export would)."""
    rng = rng or random.Random(0)
    for sub in ("gateways", "broker", "ingest"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    files = collections.defaultdict(list)
    for t, g, text in gw:
        h = int((t - START) // 3600)
        if 0 <= h < 168:
            files[("gateways", "%s-d%d-h%02d.log" % (g, h // 24, h % 24))].append((t, text))
    for t, n, text in broker:
        d = int((t - START) // 86400)
        if 0 <= d < 7:
            files[("broker", "%s-d%d.log" % (n, d))].append((t, text))
    for t, host, rec in ingest:
        h = int((t - START) // 3600)
        if 0 <= h < 168:
            files[("ingest", "%s-d%d-h%02d.jsonl" % (host, h // 24, h % 24))].append((t, json.dumps(
                rec, separators=(",", ":"))))
    for (sub, name), group in sorted(files.items()):
        group.sort(key=lambda x: x[0])
        if sub == "gateways":  # at-least-once shipping
            n = len(group)
            group = [x for x in group for _ in range(2 if rng.random() < 0.03 else 1)]
            STATS["repeated gateway lines"] += len(group) - n
            STATS["gateway lines"] += len(group)
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
