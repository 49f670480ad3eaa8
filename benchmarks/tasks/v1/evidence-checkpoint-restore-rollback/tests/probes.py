"""Probes of evidence-checkpoint-restore-rollback: the detector's answers on fresh weeks, on the repository's week
and on hand-made log folders (bench/verdict_runner.py; the folders come from the runner's setup.py)."""

import os


def _found(ctx, folder):
    return ctx.load("detect").rolled_back(folder)


def _labels(ctx, week):
    flagged = set(_found(ctx, week["dir"]))
    return [job in flagged for job in week["ids"]]


def probe_detector_fresh_week_a(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_a"])


def probe_detector_fresh_week_b(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_b"])


def probe_detector_repository_week(ctx):
    logs = ctx.path("logs")
    jobs = sorted(n[:-len(".log")] for n in os.listdir(os.path.join(logs, "trainer")))
    return _labels(ctx, {"dir": logs, "ids": jobs})


def _case(ctx, name):
    return sorted(set(_found(ctx, ctx.fixture["cases"][name])))


def probe_upload_cut(ctx):
    return _case(ctx, "upload_cut")


def probe_user_restart_then_resume(ctx):
    return _case(ctx, "user_restart_then_resume")


def probe_restart_then_rollback(ctx):
    return _case(ctx, "restart_then_rollback")


def probe_early_and_plain(ctx):
    return _case(ctx, "early_and_plain")


def probe_repository_tests_pass(ctx):
    import sys
    r = ctx.run([sys.executable, "-I", "-m", "unittest", "discover", "-s", "trainops/tests", "-t", "."], timeout=120)
    return r["returncode"]
