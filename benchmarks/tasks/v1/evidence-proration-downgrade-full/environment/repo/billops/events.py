"""Reader for the billing API's event stream (logs/events/events-dDAY.jsonl, docs/formats.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

SUBSCRIPTION_TYPES = ("subscription.renewed", "subscription.updated", "subscription.seats_changed")


def read_events(log_dir: str, types: tuple[str, ...] | None = None) -> Iterator[dict]:
    """Every event of the week's export, in file order, once per id (the stream is at least once)."""
    folder = os.path.join(log_dir, "events")
    seen = set()
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".jsonl"):
            continue
        with open(os.path.join(folder, name)) as f:
            for line in f:
                if not line.strip():
                    continue
                event = json.loads(line)
                if event["id"] in seen or (types is not None and event["type"] not in types):
                    continue
                seen.add(event["id"])
                yield event


def by_id(log_dir: str, types: tuple[str, ...] | None = None) -> dict[str, dict]:
    return {e["id"]: e for e in read_events(log_dir, types)}


def accounts(log_dir: str) -> dict[str, dict]:
    """{account: {"region", "billing", "plan", "seats"}} as of the account's last event of the week."""
    out = {}
    for e in read_events(log_dir):
        out[e["account"]] = {"region": e["region"], "billing": e["billing"], "plan": e["plan"], "seats": e["seats"]}
    return out


def usage_totals(log_dir: str) -> dict[str, dict[str, float]]:
    """{account: {"api_calls", "storage_gb_days"}} summed over the week's usage summaries."""
    out = {}
    for e in read_events(log_dir, ("usage.summarized",)):
        t = out.setdefault(e["account"], {"api_calls": 0, "storage_gb_days": 0.0})
        t["api_calls"] += e.get("api_calls", 0)
        t["storage_gb_days"] += e.get("storage_gb", 0.0)
    return out
