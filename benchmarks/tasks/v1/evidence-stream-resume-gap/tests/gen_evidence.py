"""A week of production logs of a streaming completion service, from a seed (stdlib only).

    python generate.py REPO     builds REPO from its pinned h11 release and history (sdist_repo.py, a copy of the
                                suite's shared script next to this file: the release the gateway speaks HTTP/1.1
                                with, then the on-call team's opskit/ tools as a commit), then writes
                                REPO/logs/ (seed 1, 1,000 requests: ≈ 1,200 files, ≈ 25 MB)

Three sources, joined by request id and connection number:
  logs/gateway/gw-<host>-<day>-<hour>.jsonl  one line per client connection (at-least-once: some lines twice)
  logs/worker/<request id>.jsonl             the worker's trace of one request: start, chunks, resumes, end
  logs/billing/billing-<day>.csv             tokens billed and generated per request

The server's bug (fixed in production at a point of the week, not in any repository): a client that reconnects
sends the byte offset it holds (`resume_from`); before the fix, when that offset fell inside a chunk the worker
restarted at the next chunk boundary, so the client silently lost the bytes in between. After the fix the worker
restarts at the start of that chunk and the client drops the bytes it already has (an overlap, harmless). Harmless
anomalies: resumes at an exact boundary, overlaps, disconnects without a resume, duplicated gateway lines,
duplicated worker chunk lines, billing below generation (cached prompts).

The verifier's setup.py imports this file (a copy in tests/) to draw fresh weeks with other seeds and other
fix times; `write_logs` returns the true labels ({request id: lost bytes}); given a dict as `kinds`, it also fills
in the harmless anomaly kinds drawn ({kind: requests}) for benchmarks/evidence_stats.py.
"""

from __future__ import annotations

import json
import os
import random
import sys

WEEK_S = 7 * 24 * 3600
START = 1_700_000_000  # 2023-11-14T22:13:20Z
HOSTS = ("gw-a", "gw-b", "gw-c")
WORDS = ("the", "model", "stream", "token", "answer", "cache", "query", "result", "vector", "index", "retry", "edge")


def _chunks(rng: random.Random, n: int) -> list[int]:
    """Byte lengths of a reply's n chunks (multi-byte text: 3 to 40 bytes)."""
    return [rng.randint(3, 40) for _ in range(n)]


def make_request(rng: random.Random, rid: str, t0: float, fixed_at: float) -> tuple[dict, bool]:
    """One request's events in all three sources and whether the client lost bytes (the label)."""
    n = rng.randint(60, 700)
    sizes = _chunks(rng, n)
    starts = [0]
    for s in sizes:
        starts.append(starts[-1] + s)
    total = starts[-1]
    worker = [{"ts": round(t0, 3), "ev": "start", "req": rid, "model": rng.choice(("m-small", "m-large"))}]
    gateway, affected, t = [], False, t0
    met = set()  # the harmless anomaly kinds the request met (the ground truth evidence_stats.py counts)
    host = rng.choice(HOSTS)
    drops = 0 if rng.random() > 0.3 else (1 if rng.random() < 0.7 else 2)  # connections lost, each resumed
    gives_up = rng.random() < 0.15  # the last connection drops too and the client does not come back
    pos, held, c = 0, 0, 0  # server position, bytes the client holds, connection number
    while True:
        asked = None
        if c:  # a reconnect: the client asks for the bytes after those it holds
            asked = held
            k = max(i for i in range(n) if starts[i] <= asked)
            if starts[k] == asked:
                pos = asked
                met.add("resume_at_exact_boundary")
            elif t < fixed_at:  # the bug: restart at the next chunk boundary, the rest of chunk k is lost
                pos = starts[k + 1]
                affected = True
            else:  # the fix: restart at the chunk's start; the client drops the bytes it has twice
                pos = starts[k]
                met.add("resume_overlap_after_fix")
            worker.append({"ts": round(t, 3), "ev": "resume", "conn": c, "off": pos})
        first = starts.index(pos)
        final = c == drops or first + 1 >= n - 1
        if final and (not gives_up or first + 1 > n - 1):
            stop, partial = n, 0
        else:  # the connection drops after chunk `stop` started, possibly inside it
            stop = rng.randint(first + 1, n - 1)
            partial = rng.randint(1, sizes[stop] - 1) if rng.random() < 0.4 else 0
        for i in range(first, min(n, stop + (1 if partial else 0))):
            t += rng.uniform(0.01, 0.08)
            line = {"ts": round(t, 3), "ev": "chunk", "conn": c, "i": i, "off": starts[i], "n": sizes[i],
                    "text": " ".join(rng.choice(WORDS) for _ in range(2))}
            worker.append(line)
            if rng.random() < 0.004:  # at-least-once logging of chunk lines
                worker.append(dict(line))
                met.add("duplicated_chunk_line")
        sent = starts[stop] + partial - pos
        # what the client counts as held: after a lost range it does not know about, its own count (asked + sent)
        held = (asked if asked is not None and pos > asked else pos) + sent
        status = 200 if stop == n else 499
        gateway.append({"ts": round(t, 3), "host": host if rng.random() < 0.7 else rng.choice(HOSTS), "req": rid,
                        "conn": c, "status": status, "bytes_sent": sent, "resume_from": asked,
                        "latency_ms": rng.randint(80, 900)})
        t += rng.uniform(0.5, 90.0)
        if final:
            break
        c += 1
    if status == 200:
        worker.append({"ts": round(t, 3), "ev": "end", "total": total})
    else:
        met.add("disconnect_without_resume")
    tokens = n * rng.randint(1, 2)
    billed = tokens if rng.random() > 0.15 else max(1, tokens - rng.randint(1, tokens // 3 + 1))
    if billed < tokens:
        met.add("billed_below_generated")
    if rng.random() < 0.15:  # duplicated gateway line
        gateway.append(dict(rng.choice(gateway)))
        met.add("duplicated_gateway_line")
    return {"worker": worker, "gateway": gateway, "billing": (rid, round(t0, 3), tokens, billed),
            "kinds": met}, affected


def write_logs(folder: str, seed: int = 1, count: int = 1000, fixed_at_frac: float | None = None,
               kinds: dict | None = None) -> dict:
    """Write a week of logs under folder/{gateway,worker,billing}; {request id: lost bytes} (the labels). kinds:
    filled with the harmless anomaly kinds drawn (module docstring)."""
    rng = random.Random(seed)
    fixed_at = START + WEEK_S * (fixed_at_frac if fixed_at_frac is not None else rng.uniform(0.08, 0.15))
    labels, gateway, billing = {}, {}, {}
    os.makedirs(os.path.join(folder, "worker"), exist_ok=True)
    os.makedirs(os.path.join(folder, "gateway"), exist_ok=True)
    os.makedirs(os.path.join(folder, "billing"), exist_ok=True)
    for j in range(count):
        rid = "r%06x" % rng.getrandbits(24) + "%03d" % j
        t0 = START + rng.uniform(0, WEEK_S - 3600)
        req, labels[rid] = make_request(rng, rid, t0, fixed_at)
        with open(os.path.join(folder, "worker", rid + ".jsonl"), "w") as f:
            f.writelines(json.dumps(e, separators=(",", ":")) + "\n" for e in req["worker"])
        for line in req["gateway"]:
            hour = int((line["ts"] - START) // 3600)
            gateway.setdefault((line["host"], hour), []).append(line)
        billing.setdefault(int((t0 - START) // 86400), []).append(req["billing"])
        if kinds is not None:
            for name in req["kinds"]:
                kinds[name] = kinds.get(name, 0) + 1
    for (host, hour), lines in gateway.items():
        lines.sort(key=lambda x: x["ts"] + rng.uniform(-2.0, 2.0))  # clocks of the gateway hosts disagree a little
        name = "gw-%s-d%d-h%02d.jsonl" % (host, hour // 24, hour % 24)
        with open(os.path.join(folder, "gateway", name), "w") as f:
            f.writelines(json.dumps(x, separators=(",", ":")) + "\n" for x in lines)
    for day, rows in billing.items():
        with open(os.path.join(folder, "billing", "billing-d%d.csv" % day), "w") as f:
            f.write("request_id,started,tokens_generated,tokens_billed\n")
            f.writelines("%s,%s,%d,%d\n" % r for r in sorted(rows, key=lambda r: r[1]))
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
