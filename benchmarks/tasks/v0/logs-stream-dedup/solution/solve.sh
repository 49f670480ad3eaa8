#!/usr/bin/env bash
# Root cause: chunks were de-duplicated by their ts, but the gateway stamps several chunks with one ts (they were
# dropped) and re-sent chunks get a new ts (they were duplicated). De-duplicate by seq; detect both patterns.
set -euo pipefail
cat > streamkit/assemble.py <<'PY'
"""Rebuild a reply from its stream events (docs/protocol.md)."""


def assemble(events):
    """The reply text: chunk deltas in seq order, each seq once (re-sent chunks are dropped)."""
    parts = {}
    for event in events:
        if event.get("type") == "chunk":
            parts.setdefault(event["seq"], event["delta"])
    return "".join(parts[seq] for seq in sorted(parts))
PY
cat > detect.py <<'PY'
"""Which sessions did the released client (chunks de-duplicated by ts) render wrongly?

It dropped a chunk whose ts equalled an earlier chunk's ts (gateway batching), and kept both copies of a re-sent
chunk (same seq, new ts). Either pattern in a log means the rendered reply differed from the real one.
"""

import json


def is_affected(path):
    with open(path, encoding="utf-8") as f:
        chunks = [e for e in map(json.loads, filter(str.strip, f)) if e.get("type") == "chunk"]
    seqs = [c["seq"] for c in chunks]
    stamps = [c["ts"] for c in chunks]
    return len(set(seqs)) != len(seqs) or len(set(stamps)) != len(stamps)
PY
