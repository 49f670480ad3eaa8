"""Deterministic stream logs for the logs-stream-dedup task (also environment/generate.py of the task).

`make_session(rng, sid)` returns (events, affected): affected means the released client (which de-duplicates
chunks by their timestamp) renders a different reply than the protocol's (chunks by seq, each once).
"""

import csv
import json
import os
import random
import sys

WORDS = ("the build cache stores compiled modules so the next run can skip them entirely when inputs match "
         "a hash of the sources and flags decides whether an entry is reused or rebuilt from scratch "
         "remote workers fetch entries over the network and fall back to local compilation on a miss").split()


def released_assemble(events):
    seen, parts = set(), []
    for e in events:
        if e.get("type") == "chunk" and e["ts"] not in seen:
            seen.add(e["ts"])
            parts.append((e["seq"], e["delta"]))
    return "".join(d for _, d in sorted(parts, key=lambda p: p[0]))


def correct_assemble(events):
    parts = {}
    for e in events:
        if e.get("type") == "chunk":
            parts.setdefault(e["seq"], e["delta"])
    return "".join(parts[s] for s in sorted(parts))


def make_session(rng, sid):
    n = rng.randint(12, 45)
    deltas = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3))) + " " for _ in range(n)]
    batched = rng.random() < 0.12
    replay = rng.random() < 0.10
    ts = rng.randint(1_700_000_000_000, 1_700_100_000_000)
    events = [{"type": "start", "session": sid, "ts": ts}]
    chunks = []
    for seq, delta in enumerate(deltas):
        if not (batched and seq and rng.random() < 0.35):
            ts += rng.randint(4, 60)
        chunks.append({"type": "chunk", "seq": seq, "ts": ts, "delta": delta})
    cut = rng.randint(3, n - 1) if replay else None
    for seq, chunk in enumerate(chunks):
        events.append(chunk)
        if rng.random() < 0.15:
            events.append({"type": "ping", "ts": chunk["ts"]})
        if seq == cut:
            last = chunk["ts"]
            last += rng.randint(200, 900)
            events.append({"type": "reconnect", "ts": last})
            for old in chunks[max(0, cut - rng.randint(1, 3)):cut + 1]:
                last += rng.randint(3, 20)
                events.append({**old, "ts": last})
            for later in chunks[cut + 1:]:
                later["ts"] = last = max(later["ts"], last) + rng.randint(3, 20)
    events.append({"type": "end", "ts": events[-1]["ts"] + 5, "chunks": n})
    return events, released_assemble(events) != correct_assemble(events)


def write_logs(out_dir, seed, count):
    """Write count sessions as out_dir/<sid>.jsonl; returns {sid: affected}."""
    rng = random.Random(seed)
    os.makedirs(out_dir, exist_ok=True)
    labels = {}
    for i in range(count):
        sid = f"s{seed % 1000:03d}-{i:04d}"
        events, labels[sid] = make_session(rng, sid)
        with open(os.path.join(out_dir, f"{sid}.jsonl"), "w") as f:
            f.writelines(json.dumps(e) + "\n" for e in events)
    return labels


def main(repo):
    labels = write_logs(os.path.join(repo, "logs"), seed=20240311, count=300)
    affected = sorted(s for s, bad in labels.items() if bad)
    complaints = random.Random(5).sample(affected, min(12, len(affected)))
    os.makedirs(os.path.join(repo, "reports"), exist_ok=True)
    with open(os.path.join(repo, "reports", "complaints.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["session", "user_comment"])
        comments = ["words missing in the middle", "a sentence repeated twice", "reply reads oddly", "garbled text"]
        for i, sid in enumerate(sorted(complaints)):
            w.writerow([sid, comments[i % len(comments)]])


if __name__ == "__main__":
    main(sys.argv[1])
