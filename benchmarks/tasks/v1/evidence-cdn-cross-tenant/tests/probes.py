"""Probes of evidence-cdn-cross-tenant: the detector's answers on fresh weeks, on the repository's week and on
hand-made log folders (bench/verdict_runner.py; the folders come from the runner's setup.py)."""

import os


def _found(ctx, folder):
    return ctx.load("detect").served_other_tenant(folder)


def _labels(ctx, week):
    flagged = set(_found(ctx, week["dir"]))
    return [session in flagged for session in week["ids"]]


def probe_detector_fresh_week_a(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_a"])


def probe_detector_fresh_week_b(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_b"])


def probe_detector_repository_week(ctx):
    logs = ctx.path("logs")
    sessions = set()
    for name in os.listdir(os.path.join(logs, "edge")):
        with open(os.path.join(logs, "edge", name)) as f:
            sessions.update(line.split(" ", 4)[3] for line in f)
    return _labels(ctx, {"dir": logs, "ids": sorted(sessions)})


def _case(ctx, name):
    return sorted(set(_found(ctx, ctx.fixture["cases"][name])))


def probe_stale_other_tenant(ctx):
    return _case(ctx, "stale_other_tenant")


def probe_own_old_version_and_shared_asset(ctx):
    return _case(ctx, "own_old_version_and_shared_asset")


def probe_own_entries_side_by_side(ctx):
    return _case(ctx, "own_entries_side_by_side")


def probe_moved_after_origin_error(ctx):
    return _case(ctx, "moved_after_origin_error")


def probe_repository_tests_pass(ctx):
    import sys
    r = ctx.run([sys.executable, "-I", "-m", "unittest", "discover", "-s", "edgeops/tests", "-t", "."], timeout=120)
    return r["returncode"]
