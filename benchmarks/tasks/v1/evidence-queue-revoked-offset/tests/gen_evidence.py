"""A week of production logs of an order-confirmation queue, from a seed (stdlib only).

    python generate.py REPO     builds REPO from its pinned kafka-python release and history (sdist_repo.py, a copy
                                of the suite's shared script next to this file: the release the mailer consumers
                                run, then the notifications team's mailops/ tools as a commit), then writes
                                REPO/logs/ (seed 11, 12,000 orders: ≈ 1,040 files, ≈ 23 MB)

Three sources, joined by message id, partition and offset:
  logs/producer/<service>-d<day>.jsonl        the producing services' send attempts (retried on timeout)
  logs/consumer/<consumer>-d<day>-h<hour>.log  the mailer consumers' text logs (receive, send, failures, heartbeats)
  logs/broker/broker-d<day>.jsonl             partition moves between consumers, dead-lettered messages

The broker's bug (fixed in production at a point of the week, not in any repository): when a partition moved to
another consumer while a message of it was being processed, the broker committed the offset *after* that
message, so the new owner started past it and the message was never processed. After the fix the new owner starts
at the interrupted message and processes it. Harmless anomalies: transient failures retried, poison messages
dead-lettered, producer timeouts that were retried (the same message twice at two offsets, the second skipped as
a duplicate; or once), producers that gave up (the caller got an error), partition moves with nothing in flight.

The verifier's setup.py imports this file (a copy in tests/) to draw fresh weeks with other seeds and other
fix times; `write_logs` returns the true labels ({message id: never processed}); given a dict as `kinds`, it also
fills in the harmless anomaly kinds drawn ({kind: messages}; the partition moves with nothing in flight carry no
message and are not counted) for benchmarks/evidence_stats.py.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

WEEK_S = 7 * 24 * 3600
START = 1_701_043_200  # 2023-11-27T00:00:00Z
CONSUMERS = tuple("mailer-%d" % i for i in range(6))
SERVICES = ("checkout", "orders-api", "backoffice")
PARTITIONS = 12
TOPIC = "orders.confirmed"


def _hex(rng: random.Random, bits: int = 48) -> str:
    return "%0*x" % (bits // 4, rng.getrandbits(bits))


def stamp(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + ".%03dZ" % int(ts % 1 * 1000)


def text_line(ts: float, level: str, consumer: str, event: str, **fields) -> tuple[float, str, str]:
    """(ts, consumer, line) of a consumer log: `ISO-TIME LEVEL CONSUMER EVENT key=value ...`."""
    kv = " ".join("%s=%s" % kv for kv in fields.items())
    return ts, consumer, "%s %-5s %s %s %s" % (stamp(ts), level, consumer, event, kv)


class Week:
    """Per-partition offsets and the lines of the three sources as they are produced."""

    def __init__(self, rng: random.Random):
        self.rng, self.offsets = rng, [0] * PARTITIONS
        self.producer, self.consumer, self.broker = [], [], []
        self.kinds = {}  # harmless anomaly kind -> messages (the ground truth evidence_stats.py counts)

    def kind(self, name, msg):
        self.kinds.setdefault(name, set()).add(msg)

    def append(self, part: int) -> int:
        self.offsets[part] += 1
        return self.offsets[part] - 1

    def other(self, consumer: str) -> str:
        return self.rng.choice([c for c in CONSUMERS if c != consumer])


def message(w: Week, t0: float, fixed_at: float) -> tuple[str, bool]:
    """One order confirmation from its producer to the consumers; (message id, never processed)."""
    rng = w.rng
    msg, svc, part = "m_" + _hex(rng), rng.choice(SERVICES), rng.randrange(PARTITIONS)
    order = "ord_" + _hex(rng, 32)
    r, t, offsets = rng.random(), t0, []
    tries = 3 if r < 0.01 else 2 if r < 0.34 else 1  # the first attempts time out (5 s); the last is acked
    if r < 0.34:
        w.kind("producer_gave_up" if r < 0.01 else "producer_retry_twice_in_log" if r < 0.18 else
               "producer_retry_once_in_log", msg)
    for attempt in range(1, tries + 1):
        acked = attempt == tries and r >= 0.01  # r < 0.01: the producer gives up after three timeouts
        if acked or (r >= 0.01 and r < 0.18):  # a timed-out attempt that reached the broker anyway
            offsets.append(w.append(part))
        w.producer.append({"ts": round(t + (0.004 if acked else 5.0), 3), "service": svc, "topic": TOPIC,
                           "msg": msg, "order": order, "attempt": attempt, "partition": part,
                           "status": "acked" if acked else "timeout", "offset": offsets[-1] if acked else None})
        t += 5.0 + rng.uniform(0.1, 1.0)
    if r < 0.01:
        w.producer.append({"ts": round(t, 3), "service": svc, "topic": TOPIC, "msg": msg, "order": order,
                           "attempt": tries, "partition": part, "status": "failed", "offset": None})
        return msg, False
    processed, lost = False, False
    poison = rng.random() < 0.04
    for off in offsets:
        owner = rng.choice(CONSUMERS)
        t += rng.uniform(0.05, 3.0)
        ids = {"partition": part, "offset": off, "msg": msg}
        w.consumer.append(text_line(t, "INFO", owner, "received", **ids, attempt=1))
        if processed:  # the second copy of a retried send
            w.consumer.append(text_line(t + 0.002, "INFO", owner, "skipped", **ids, reason="duplicate"))
            continue
        u = rng.random()
        if poison:
            w.kind("poison_dead_lettered", msg)
            for attempt in (1, 2, 3):
                if attempt > 1:
                    w.consumer.append(text_line(t, "INFO", owner, "received", **ids, attempt=attempt))
                w.consumer.append(text_line(t + 0.01, "ERROR", owner, "failed", **ids, attempt=attempt,
                                            error="TemplateError"))
                t += 30.0
            w.broker.append({"ts": round(t, 3), "ev": "dead_letter", "partition": part, "offset": off, "msg": msg,
                             "consumer": owner, "queue": TOPIC + ".dlq"})
            processed = True  # handled: the message is parked, nobody waits for it to be processed again
            continue
        if u < 0.10:  # the partition moves to another consumer while the message is processed
            t += rng.uniform(0.01, 0.5)
            new = w.other(owner)
            w.consumer.append(text_line(t, "INFO", owner, "revoked", partition=part))
            w.consumer.append(text_line(t + 0.001, "WARN", owner, "interrupted", **ids, reason="partition_revoked"))
            start = off + 1 if t < fixed_at else off  # the bug: the new owner starts after the message
            w.broker.append({"ts": round(t, 3), "ev": "move", "partition": part, "from": owner, "to": new,
                             "committed": start, "generation": rng.randint(100, 999)})
            w.consumer.append(text_line(t + 0.2, "INFO", new, "assigned", partition=part, start_offset=start))
            if start > off:
                lost = True
                continue
            w.kind("moved_in_flight_after_fix", msg)
            owner, t = new, t + rng.uniform(0.3, 2.0)
            w.consumer.append(text_line(t, "INFO", owner, "received", **ids, attempt=1))
        elif u < 0.30:  # a transient failure, redelivered to the same consumer
            w.kind("transient_failure_retried", msg)
            w.consumer.append(text_line(t + 0.4, "ERROR", owner, "failed", **ids, attempt=1,
                                        error=rng.choice(("SMTPTimeout", "ConnectionReset", "RateLimited"))))
            t += 30.0
            w.consumer.append(text_line(t, "INFO", owner, "received", **ids, attempt=2))
        t += rng.uniform(0.02, 0.9)
        w.consumer.append(text_line(t, "INFO", owner, "sent", **ids, order=order, ms=rng.randint(15, 900)))
        processed = True
    return msg, lost and not processed


def noise(w: Week, every_s: float):
    """Heartbeats and fetch statistics of every consumer, and partition moves with nothing in flight."""
    rng = w.rng
    for c in CONSUMERS:
        t = START + rng.uniform(0, every_s)
        while t < START + WEEK_S:
            if rng.random() < 0.8:
                w.consumer.append(text_line(t, "DEBUG", c, "heartbeat", lag=rng.randint(0, 40),
                                            inflight=rng.randint(0, 3)))
            else:
                w.consumer.append(text_line(t, "INFO", c, "fetched", partition=rng.randrange(PARTITIONS),
                                            records=rng.randint(0, 50), bytes=rng.randint(0, 90000)))
            t += every_s * rng.uniform(0.7, 1.3)
    for _ in range(400):
        t, part, c = START + rng.uniform(0, WEEK_S), rng.randrange(PARTITIONS), rng.choice(CONSUMERS)
        new = w.other(c)
        w.broker.append({"ts": round(t, 3), "ev": "move", "partition": part, "from": c, "to": new,
                         "committed": None, "generation": rng.randint(100, 999)})
        w.consumer.append(text_line(t, "INFO", c, "revoked", partition=part))
        w.consumer.append(text_line(t + 0.2, "INFO", new, "assigned", partition=part, start_offset="committed"))


def write_folder(folder: str, w: Week):
    """Write the three sources in the production layout under folder."""
    for sub in ("producer", "consumer", "broker"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    files = {}
    for p in w.producer:
        files.setdefault(("producer", "%s-d%d.jsonl" % (p["service"], (p["ts"] - START) // 86400)), []).append(
            (p["ts"], json.dumps(p, separators=(",", ":"))))
    for b in w.broker:
        files.setdefault(("broker", "broker-d%d.jsonl" % ((b["ts"] - START) // 86400)), []).append(
            (b["ts"], json.dumps(b, separators=(",", ":"))))
    for ts, c, line in w.consumer:
        hour = int((ts - START) // 3600)
        files.setdefault(("consumer", "%s-d%d-h%02d.log" % (c, hour // 24, hour % 24)), []).append((ts, line))
    for (sub, name), lines in files.items():
        lines.sort()
        with open(os.path.join(folder, sub, name), "w") as f:
            f.writelines(line + "\n" for _, line in lines)


def write_logs(folder: str, seed: int = 11, count: int = 12000, fixed_at_frac: float | None = None,
               heartbeat_s: float = 15.0, kinds: dict | None = None) -> dict:
    """Write a week of logs under folder/{producer,consumer,broker}; {message id: never processed}. kinds: filled
    with the harmless anomaly kinds drawn (module docstring)."""
    rng = random.Random(seed)
    fixed_at = START + WEEK_S * (fixed_at_frac if fixed_at_frac is not None else rng.uniform(0.2, 0.3))
    w = Week(rng)
    labels = {}
    for t0 in sorted(START + rng.uniform(0, WEEK_S - 3600) for _ in range(count)):
        msg, labels[msg] = message(w, t0, fixed_at)
    noise(w, heartbeat_s)
    write_folder(folder, w)
    if kinds is not None:
        kinds.update({name: len(msgs) for name, msgs in w.kinds.items()})
    return labels


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
