"""Probes of evidence-meter-fallback-hour: the detector's answers on fresh weeks, on the repository's week and on
hand-made folders (bench/verdict_runner.py; the folders come from the runner's setup.py)."""

import os
import sys


def _labels(ctx, week):
    flagged = set(ctx.load("detect").overbilled(week["dir"]))
    return [m in flagged for m in week["ids"]]


def probe_detector_fresh_week_a(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_a"])


def probe_detector_fresh_week_b(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_b"])


def probe_detector_repository_week(ctx):
    logs = ctx.path("logs")
    ids = sorted(n[:-len(".csv")] for n in os.listdir(os.path.join(logs, "meters")))
    return _labels(ctx, {"dir": logs, "ids": ids})


def _case(ctx, name):
    return sorted(set(ctx.load("detect").overbilled(ctx.fixture["cases"][name])))


def probe_replaced_meter_is_fine(ctx):
    return _case(ctx, "replaced_meter_is_fine")


def probe_repeated_lines_are_fine(ctx):
    return _case(ctx, "repeated_lines_are_fine")


def probe_hour_billed_twice(ctx):
    return _case(ctx, "hour_billed_twice")


def probe_mixed(ctx):
    return _case(ctx, "mixed")


def probe_repository_tests_pass(ctx):
    r = ctx.run([sys.executable, "-I", "-m", "unittest", "discover", "-s", "billops/tests", "-t", "."], timeout=120)
    return r["returncode"]
