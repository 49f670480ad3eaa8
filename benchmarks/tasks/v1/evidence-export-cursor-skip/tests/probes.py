"""Probes of evidence-export-cursor-skip: the detector's answers on fresh weeks, on the repository's week and on
hand-made folders (bench/verdict_runner.py; the folders come from the runner's setup.py)."""

import json
import os
import sys


def _found(ctx, folder):
    return ctx.load("detect").skipped_exports(folder)


def _labels(ctx, week):
    flagged = set(_found(ctx, week["dir"]))
    return [export in flagged for export in week["ids"]]


def probe_detector_fresh_week_a(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_a"])


def probe_detector_fresh_week_b(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_b"])


def probe_detector_repository_week(ctx):
    logs = ctx.path("logs")
    exports = set()
    for name in os.listdir(os.path.join(logs, "api")):
        with open(os.path.join(logs, "api", name)) as f:
            for line in f:
                x = json.loads(line)
                if x["status"] == 200:
                    exports.add(x["export"])
    return _labels(ctx, {"dir": logs, "ids": sorted(exports)})


def _case(ctx, name):
    return sorted(set(_found(ctx, ctx.fixture["cases"][name])))


def probe_abandoned_after_shift(ctx):
    return _case(ctx, "abandoned_after_shift")


def probe_offset_and_id_cursor(ctx):
    return _case(ctx, "offset_and_id_cursor")


def probe_ahead_insert_retry(ctx):
    return _case(ctx, "ahead_insert_retry")


def probe_across_hours(ctx):
    return _case(ctx, "across_hours")


def probe_repository_tests_pass(ctx):
    r = ctx.run([sys.executable, "-I", "-m", "unittest", "discover", "-s", "syncops/tests", "-t", "."], timeout=120)
    return r["returncode"]
