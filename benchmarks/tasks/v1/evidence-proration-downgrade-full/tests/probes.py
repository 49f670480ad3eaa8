"""Probes of evidence-proration-downgrade-full: the detector's answers on fresh weeks, on the repository's week and
on hand-made folders (bench/verdict_runner.py; the folders come from the runner's setup.py)."""

import csv
import os
import sys


def _found(ctx, folder):
    return ctx.load("detect").overcharged_downgrades(folder)


def _labels(ctx, week):
    flagged = set(_found(ctx, week["dir"]))
    return [invoice in flagged for invoice in week["ids"]]


def probe_detector_fresh_week_a(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_a"])


def probe_detector_fresh_week_b(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_b"])


def probe_detector_repository_week(ctx):
    logs = ctx.path("logs")
    invoices = set()
    for name in os.listdir(os.path.join(logs, "invoices")):
        with open(os.path.join(logs, "invoices", name), newline="") as f:
            invoices.update(row["invoice"] for row in csv.DictReader(f))
    return _labels(ctx, {"dir": logs, "ids": sorted(invoices)})


def _case(ctx, name):
    return sorted(set(_found(ctx, ctx.fixture["cases"][name])))


def probe_late_credit_and_correction(ctx):
    return _case(ctx, "late_credit_and_correction")


def probe_goodwill_period_end_upgrade(ctx):
    return _case(ctx, "goodwill_period_end_upgrade")


def probe_repository_tests_pass(ctx):
    r = ctx.run([sys.executable, "-I", "-m", "unittest", "discover", "-s", "billops/tests", "-t", "."], timeout=120)
    return r["returncode"]
