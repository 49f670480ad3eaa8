"""Probes of evidence-ratelimit-shared-bucket: the detector's answers on fresh weeks, on the repository's week and
on hand-made log folders (bench/verdict_runner.py; the folders come from the runner's setup.py)."""

import json
import os


def _found(ctx, folder):
    return ctx.load("detect").refused_under_limit(folder)


def _labels(ctx, week):
    flagged = set(_found(ctx, week["dir"]))
    return [key in flagged for key in week["ids"]]


def probe_detector_fresh_week_a(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_a"])


def probe_detector_fresh_week_b(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_b"])


def probe_detector_repository_week(ctx):
    logs = ctx.path("logs")
    with open(os.path.join(logs, "plans", "plans.json")) as f:
        keys = sorted(json.load(f))
    return _labels(ctx, {"dir": logs, "ids": keys})


def _case(ctx, name):
    return sorted(set(_found(ctx, ctx.fixture["cases"][name])))


def probe_plan_changed(ctx):
    return _case(ctx, "plan_changed")


def probe_plan_changed_after(ctx):
    return _case(ctx, "plan_changed_after")


def probe_upstream_errors_count(ctx):
    return _case(ctx, "upstream_errors_count")


def probe_calendar_minute(ctx):
    return _case(ctx, "calendar_minute")


def probe_overload_and_repeated_lines(ctx):
    return _case(ctx, "overload_and_repeated_lines")


def probe_repository_tests_pass(ctx):
    import sys
    r = ctx.run([sys.executable, "-I", "-m", "unittest", "discover", "-s", "quotaops/tests", "-t", "."], timeout=120)
    return r["returncode"]
