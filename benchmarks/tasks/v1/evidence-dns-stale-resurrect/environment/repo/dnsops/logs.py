"""Resolver answer logs and upstream fetch logs (docs/formats.md)."""

import collections
import json
import os

Answer = collections.namedtuple("Answer", "ts node client name answer ttl how")


def parse_answer(line):
    """One answer log line as an Answer (ts and ttl as ints)."""
    ts, node, client, name, answer, ttl, how = line.split()
    return Answer(int(ts), node, client, name, answer, int(ttl), how)


def iter_answers(log_dir, node=None):
    """Every answer line under log_dir/resolvers (repeated lines included), file by file."""
    root = os.path.join(log_dir, "resolvers")
    for nd in sorted(os.listdir(root)):
        if node is not None and nd != node:
            continue
        for name in sorted(os.listdir(os.path.join(root, nd))):
            with open(os.path.join(root, nd, name), encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        yield parse_answer(line)


def iter_fetches(log_dir):
    """Every upstream fetch under log_dir/upstream, node by node."""
    root = os.path.join(log_dir, "upstream")
    for name in sorted(os.listdir(root)):
        with open(os.path.join(root, name), encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)
