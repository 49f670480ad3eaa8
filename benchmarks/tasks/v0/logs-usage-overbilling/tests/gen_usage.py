"""Deterministic response logs for the logs-usage-overbilling task (also its environment/generate.py).

`make_response(rng, rid)` returns (events, overbilled): overbilled means summing the message_delta usage (the
released code) gives more output tokens than the last cumulative count.
"""

import csv
import json
import os
import random
import sys

TEXT = "the migration finished and all checks passed so the deploy can continue after review".split()


def released_output(events):
    return sum(e["usage"]["output_tokens"] for e in events if e["type"] == "message_delta")


def true_output(events):
    deltas = [e["usage"]["output_tokens"] for e in events if e["type"] == "message_delta"]
    return deltas[-1] if deltas else 0


def make_response(rng, rid):
    kind = rng.random()
    periodic = kind < 0.25  # long or tool-use responses: periodic cumulative usage
    zero_first = 0.25 <= kind < 0.35  # an early message_delta with 0 tokens, then the final one (harmless)
    events = [{"type": "message_start", "request": rid,
               "usage": {"input_tokens": rng.randint(20, 4000), "output_tokens": rng.choice([0, 1])}}]
    produced = 0
    for block in range(rng.randint(1, 3) if periodic else 1):
        tool = periodic and block > 0 and rng.random() < 0.6
        events.append({"type": "content_block_start", "index": block, "kind": "tool_use" if tool else "text"})
        for _ in range(rng.randint(3, 15)):
            words = [rng.choice(TEXT) for _ in range(rng.randint(1, 4))]
            delta = {"partial_json": json.dumps(words)} if tool else {"text": " ".join(words) + " "}
            events.append({"type": "content_block_delta", "index": block, "delta": delta})
            produced += rng.randint(1, 6)
            if periodic and rng.random() < 0.3:
                events.append({"type": "message_delta", "usage": {"output_tokens": produced}})
        events.append({"type": "content_block_stop", "index": block})
    if zero_first:
        events.insert(1, {"type": "message_delta", "usage": {"output_tokens": 0}})
    events.append({"type": "message_delta", "usage": {"output_tokens": produced}})
    events.append({"type": "message_stop"})
    return events, released_output(events) > true_output(events)


def write_logs(out_dir, seed, count):
    """Write count responses as out_dir/<request>.jsonl; returns {request: (overbilled, billed_output)}."""
    rng = random.Random(seed)
    os.makedirs(out_dir, exist_ok=True)
    out = {}
    for i in range(count):
        rid = f"req_{seed % 1000:03d}{i:05d}"
        events, bad = make_response(rng, rid)
        out[rid] = (bad, released_output(events))
        with open(os.path.join(out_dir, f"{rid}.jsonl"), "w") as f:
            f.writelines(json.dumps(e) + "\n" for e in events)
    return out


def main(repo):
    rows = write_logs(os.path.join(repo, "logs"), seed=31337, count=300)
    with open(os.path.join(repo, "billing_export.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["request", "billed_output_tokens"])
        for rid, (_, billed) in sorted(rows.items()):
            w.writerow([rid, billed])


if __name__ == "__main__":
    main(sys.argv[1])
