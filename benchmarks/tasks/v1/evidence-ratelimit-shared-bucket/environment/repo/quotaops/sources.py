"""Readers of the gateway logs and of the plans (docs/log-formats.md)."""

import csv
import json
import os


def requests(log_dir):
    """{request id: gateway line}: each request once (the log repeats some lines)."""
    out = {}
    folder = os.path.join(log_dir, "gateway")
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    g = json.loads(line)
                    out[g["req"]] = g
    return out


def plans(log_dir):
    """{API key: [{"from": UTC seconds, "limit": requests per minute}, ...]} in the order they took effect."""
    with open(os.path.join(log_dir, "plans", "plans.json"), encoding="utf-8") as f:
        raw = json.load(f)
    return {key: sorted(entries, key=lambda p: p["from"]) for key, entries in raw.items()}


def organisations(log_dir):
    """{API key: organisation}."""
    with open(os.path.join(log_dir, "plans", "keys.csv"), newline="", encoding="utf-8") as f:
        return {row["key"]: row["org"] for row in csv.DictReader(f)}
