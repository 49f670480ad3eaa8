"""Deliveries the outbox marked delivered although no attempt of theirs had been answered 2xx by then.

The journal (logs/outbox) records each delivery's final state and when it was reached. The workers' logs record
every HTTP attempt, on whichever worker made it, with the answer's status: a redirect (3xx) is not a delivery, a
followed redirect (`via=`) answered 2xx is. Attempts after the delivered mark (dashboard redeliveries, a worker
whose lease ran out) do not make a delivery good or bad; repeated log lines are one attempt.
"""

import csv
import datetime
import os


def _seconds(stamp):
    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def _delivered(log_dir):
    """{delivery: when the journal marked it delivered}."""
    out = {}
    folder = os.path.join(log_dir, "outbox")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), newline="") as f:
            for row in csv.DictReader(f):
                if row["state"] == "delivered":
                    out[row["delivery"]] = float(row["at"])
    return out


def _first_success(log_dir, wanted):
    """{delivery: earliest time an attempt of it was answered 2xx}, for the deliveries in wanted."""
    out = {}
    folder = os.path.join(log_dir, "workers")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                p = line.split()
                if len(p) < 10 or p[2] not in wanted or not p[9].startswith("2"):
                    continue
                t = _seconds(p[0])
                if t < out.get(p[2], float("inf")):
                    out[p[2]] = t
    return out


def phantom_deliveries(log_dir):
    """The ids of the deliveries marked delivered with no 2xx answer at or before the mark."""
    delivered = _delivered(log_dir)
    ok = _first_success(log_dir, delivered)
    return sorted(d for d, at in delivered.items() if ok.get(d, float("inf")) > at + 0.001)
