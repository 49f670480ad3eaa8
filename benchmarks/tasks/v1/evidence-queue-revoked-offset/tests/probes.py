"""Probes of evidence-queue-revoked-offset: the detector's answers on fresh weeks, on the repository's week and on
hand-made log folders (bench/verdict_runner.py; the folders come from the runner's setup.py)."""

import json
import os


def _found(ctx, folder):
    return ctx.load("detect").never_processed(folder)


def _labels(ctx, week):
    flagged = set(_found(ctx, week["dir"]))
    return [msg in flagged for msg in week["ids"]]


def probe_detector_fresh_week_a(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_a"])


def probe_detector_fresh_week_b(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_b"])


def probe_detector_repository_week(ctx):
    logs = ctx.path("logs")
    ids = set()
    for name in os.listdir(os.path.join(logs, "producer")):
        with open(os.path.join(logs, "producer", name)) as f:
            ids.update(json.loads(line)["msg"] for line in f)
    return _labels(ctx, {"dir": logs, "ids": sorted(ids)})


def _case(ctx, name):
    return sorted(set(_found(ctx, ctx.fixture["cases"][name])))


def probe_lost_copy_sent_again(ctx):
    return _case(ctx, "lost_copy_sent_again")


def probe_dead_letter_and_gave_up(ctx):
    return _case(ctx, "dead_letter_and_gave_up")


def probe_interrupted_and_redelivered(ctx):
    return _case(ctx, "interrupted_and_redelivered")


def probe_midnight_loss_and_retry(ctx):
    return _case(ctx, "midnight_loss_and_retry")


def probe_repository_tests_pass(ctx):
    import sys
    r = ctx.run([sys.executable, "-I", "-m", "unittest", "discover", "-s", "tests", "-t", "."], timeout=120)
    return r["returncode"]
