"""Order confirmations that were never processed.

A message is one `msg` id. The producer's log says which messages the broker accepted (`acked`; a producer that
gave up after its timeouts got an error and its caller retried the order, so those are not the mailer's). A
message is processed when a consumer logged `sent` for it, for any of its copies (a send retried after a timeout
can reach the broker twice; the second copy is skipped as a duplicate), and handled when the broker moved it to
the dead-letter queue. An accepted message neither sent nor dead-lettered was never processed.
"""

import json
import os


def _jsonl(folder):
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                yield json.loads(line)


def never_processed(log_dir):
    """The ids of the accepted messages that no consumer sent and the broker did not dead-letter."""
    accepted = {p["msg"] for p in _jsonl(os.path.join(log_dir, "producer")) if p["status"] == "acked"}
    done = {b["msg"] for b in _jsonl(os.path.join(log_dir, "broker")) if b["ev"] == "dead_letter"}
    folder = os.path.join(log_dir, "consumer")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                if " sent " in line:
                    fields = dict(kv.split("=", 1) for kv in line.split()[4:])
                    done.add(fields["msg"])
    return sorted(accepted - done)
