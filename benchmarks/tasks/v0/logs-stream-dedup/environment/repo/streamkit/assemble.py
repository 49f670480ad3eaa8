"""Rebuild a reply from its stream events (docs/protocol.md)."""


def assemble(events):
    """The reply text: chunk deltas in seq order, each chunk once (re-sent chunks are dropped)."""
    seen = set()
    parts = []
    for event in events:
        if event.get("type") != "chunk":
            continue
        key = event["ts"]
        if key in seen:
            continue
        seen.add(key)
        parts.append((event["seq"], event["delta"]))
    parts.sort(key=lambda p: p[0])
    return "".join(delta for _, delta in parts)
