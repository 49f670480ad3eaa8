"""Probes of evidence-search-reindex-lost: the detector's answers on fresh weeks, on the repository's week and on
hand-made folders (bench/verdict_runner.py; the folders come from the runner's setup.py)."""

import json
import os
import sys


def _found(ctx, folder):
    return ctx.load("detect").lost_changes(folder)


def _labels(ctx, week):
    flagged = set(_found(ctx, week["dir"]))
    return [change in flagged for change in week["ids"]]


def probe_detector_fresh_week_a(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_a"])


def probe_detector_fresh_week_b(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_b"])


def probe_detector_repository_week(ctx):
    logs = ctx.path("logs")
    changes = set()
    for name in os.listdir(os.path.join(logs, "cdc")):
        with open(os.path.join(logs, "cdc", name)) as f:
            changes.update(json.loads(line)["change"] for line in f)
    return _labels(ctx, {"dir": logs, "ids": sorted(changes)})


def _case(ctx, name):
    return sorted(set(_found(ctx, ctx.fixture["cases"][name])))


def probe_backlog_later_page_abort(ctx):
    return _case(ctx, "backlog_later_page_abort")


def probe_dual_write_and_skip(ctx):
    return _case(ctx, "dual_write_and_skip")


def probe_repository_tests_pass(ctx):
    r = ctx.run([sys.executable, "-I", "-m", "unittest", "discover", "-s", "tests", "-t", "."], timeout=120)
    return r["returncode"]
