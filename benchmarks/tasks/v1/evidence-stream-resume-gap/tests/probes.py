"""Probes of evidence-stream-resume-gap: the detector's answers on fresh weeks, on the repository's week and on
hand-made log folders (bench/verdict_runner.py; the folders come from the runner's setup.py)."""

import os


def _affected(ctx, folder):
    return ctx.load("detect").affected(folder)


def _labels(ctx, week):
    flagged = set(_affected(ctx, week["dir"]))
    return [rid in flagged for rid in week["ids"]]


def probe_detector_fresh_week_a(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_a"])


def probe_detector_fresh_week_b(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_b"])


def probe_detector_repository_week(ctx):
    logs = ctx.path("logs")
    ids = sorted(n[:-len(".jsonl")] for n in os.listdir(os.path.join(logs, "worker")))
    return _labels(ctx, {"dir": logs, "ids": ids})


def _case(ctx, name):
    return sorted(set(_affected(ctx, ctx.fixture["cases"][name])))


def probe_second_reconnect_gap(ctx):
    return _case(ctx, "second_reconnect_gap")


def probe_overlap_is_harmless(ctx):
    return _case(ctx, "overlap_is_harmless")


def probe_reconnect_elsewhere_duplicated(ctx):
    return _case(ctx, "reconnect_elsewhere_duplicated")


def probe_gave_up_and_duplicates(ctx):
    return _case(ctx, "gave_up_and_duplicates")


def probe_mixed(ctx):
    return _case(ctx, "mixed")


def probe_repository_tests_pass(ctx):
    import sys
    r = ctx.run([sys.executable, "-I", "-m", "unittest", "discover", "-s", "tests", "-t", "."], timeout=120)
    return r["returncode"]
