"""Probes of evidence-webhook-redirect-done: the detector's answers on fresh weeks, on the repository's week and on
hand-made folders (bench/verdict_runner.py; the folders come from the runner's setup.py)."""

import csv
import os
import sys


def _found(ctx, folder):
    return ctx.load("detect").phantom_deliveries(folder)


def _labels(ctx, week):
    flagged = set(_found(ctx, week["dir"]))
    return [delivery in flagged for delivery in week["ids"]]


def probe_detector_fresh_week_a(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_a"])


def probe_detector_fresh_week_b(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_b"])


def probe_detector_repository_week(ctx):
    logs = ctx.path("logs")
    deliveries = set()
    for name in os.listdir(os.path.join(logs, "outbox")):
        with open(os.path.join(logs, "outbox", name), newline="") as f:
            deliveries.update(row["delivery"] for row in csv.DictReader(f))
    return _labels(ctx, {"dir": logs, "ids": sorted(deliveries)})


def _case(ctx, name):
    return sorted(set(_found(ctx, ctx.fixture["cases"][name])))


def probe_redeliver_follow_dead_race(ctx):
    return _case(ctx, "redeliver_follow_dead_race")


def probe_retry_then_redirect(ctx):
    return _case(ctx, "retry_then_redirect")


def probe_repository_tests_pass(ctx):
    r = ctx.run([sys.executable, "-I", "-m", "unittest", "discover", "-s", "hookops/tests", "-t", "."], timeout=120)
    return r["returncode"]
