"""Meters the billing ingest charged more energy than they measured.

A meter's energy over the week is what its counter says: the sum of increments between consecutive readings,
a drop meaning the meter was replaced (the new counter's value is the increment). The ingest bills the sum of its
intervals, each counted once per interval id (ingest lines repeat). A meter billed more than it measured had
energy billed twice: the ingest recorded some intervals again under new ids.
"""

import csv
import json
import os

TOLERANCE_KWH = 0.005  # rounding: both sides sum the same 3-decimal increments


def _measured(path):
    total, prev = 0.0, None
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            value = float(row["kwh_counter"])
            if prev is not None:
                total += round(value - prev if value >= prev else value, 3)
            prev = value
    return total


def _billed(log_dir):
    seen, billed = set(), {}
    folder = os.path.join(log_dir, "ingest")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                x = json.loads(line)
                if x["interval"] not in seen:
                    seen.add(x["interval"])
                    billed[x["meter"]] = billed.get(x["meter"], 0.0) + x["kwh"]
    return billed


def overbilled(log_dir):
    """The ids of the meters billed for energy they did not use."""
    billed = _billed(log_dir)
    folder = os.path.join(log_dir, "meters")
    out = []
    for name in sorted(os.listdir(folder)):
        meter = name[:-len(".csv")]
        if billed.get(meter, 0.0) - _measured(os.path.join(folder, name)) > TOLERANCE_KWH:
            out.append(meter)
    return out
