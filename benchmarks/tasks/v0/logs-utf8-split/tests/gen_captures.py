"""Deterministic captures for the logs-utf8-split task (also its environment/generate.py).

`make_capture(rng)` returns (records, affected): affected means decoding each chunk on its own (the released
client) gives a different text than decoding the whole byte stream.
"""

import base64
import json
import os
import random
import sys

WORDS = ["the", "build", "is", "green", "now", "merci", "déjà", "vu", "naïve", "café", "Straße", "größer",
         "日本語", "テスト", "完了", "😀", "🚀", "ok", "done", "résumé", "año", "niño", "Ελληνικά", "привет"]
ASCII = [w for w in WORDS if w.isascii()]


def released_decode(chunks):
    return "".join(c.decode("utf-8", errors="replace") for c in chunks)


def make_capture(rng):
    pool = ASCII if rng.random() < 0.35 else WORDS
    data = " ".join(rng.choice(pool) for _ in range(rng.randint(10, 40))).encode()
    aware = rng.random() < 0.8  # most gateway nodes cut between characters; some cut anywhere
    cuts, pos = [], 0
    while pos < len(data):
        pos += rng.randint(3, 24)
        while aware and pos < len(data) and (data[pos] & 0xC0) == 0x80:
            pos += 1
        cuts.append(min(pos, len(data)))
    chunks, start = [], 0
    for end in cuts:
        chunks.append(data[start:end])
        start = end
    ts = rng.randint(1_700_000_000_000, 1_700_100_000_000)
    records = []
    for seq, chunk in enumerate(chunks):
        ts += rng.randint(5, 80)
        records.append({"seq": seq, "ts": ts, "data": base64.b64encode(chunk).decode()})
    records.append({"type": "done", "ts": ts + 3, "chunks": len(chunks), "bytes": len(data)})
    return records, released_decode(chunks) != data.decode()


def write_captures(out_dir, seed, count):
    """Write count captures as out_dir/<id>.jsonl; returns {id: affected}."""
    rng = random.Random(seed)
    os.makedirs(out_dir, exist_ok=True)
    labels = {}
    for i in range(count):
        cid = f"c{seed % 1000:03d}-{i:04d}"
        records, labels[cid] = make_capture(rng)
        with open(os.path.join(out_dir, f"{cid}.jsonl"), "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in records)
    return labels


if __name__ == "__main__":
    write_captures(os.path.join(sys.argv[1], "logs"), seed=4242, count=250)
