"""Probes of evidence-transcode-shovel-wiped: the detector's answers on fresh weeks, on the repository's week and on
hand-made folders (bench/verdict_runner.py; the folders come from the runner's setup.py)."""

import os
import re
import sys


def _found(ctx, folder):
    return ctx.load("detect").lost_videos(folder)


def _labels(ctx, week):
    flagged = set(_found(ctx, week["dir"]))
    return [video in flagged for video in week["ids"]]


def probe_detector_fresh_week_a(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_a"])


def probe_detector_fresh_week_b(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_b"])


def probe_detector_repository_week(ctx):
    logs = ctx.path("logs")
    videos = set()
    pattern = re.compile(r"\[uploader\] video (\S+) channel ")
    for name in os.listdir(os.path.join(logs, "uploaders")):
        with open(os.path.join(logs, "uploaders", name)) as f:
            for line in f:
                m = pattern.search(line)
                if m:
                    videos.add(m.group(1))
    return _labels(ctx, {"dir": logs, "ids": sorted(videos)})


def _case(ctx, name):
    return sorted(set(_found(ctx, ctx.fixture["cases"][name])))


def probe_wiped_retry_queue(ctx):
    return _case(ctx, "wiped_retry_queue")


def probe_queued_then_submitted(ctx):
    return _case(ctx, "queued_then_submitted")


def probe_spilled_then_submitted(ctx):
    return _case(ctx, "spilled_then_submitted")


def probe_rejected_unreadable_source(ctx):
    return _case(ctx, "rejected_unreadable_source")


def probe_queued_when_the_logs_end(ctx):
    return _case(ctx, "queued_when_the_logs_end")


def probe_republish_and_high_bitrate(ctx):
    return _case(ctx, "republish_and_high_bitrate")


def probe_restart_on_another_node(ctx):
    return _case(ctx, "restart_on_another_node")


def probe_queued_in_the_restart_second(ctx):
    return _case(ctx, "queued_in_the_restart_second")


def probe_queued_twice_then_wiped(ctx):
    return _case(ctx, "queued_twice_then_wiped")


def probe_same_tag_two_uploaders(ctx):
    return _case(ctx, "same_tag_two_uploaders")


def probe_spilled_across_days(ctx):
    return _case(ctx, "spilled_across_days")


def probe_repeated_lines_and_reconnects(ctx):
    return _case(ctx, "repeated_lines_and_reconnects")


def probe_repository_tests_pass(ctx):
    r = ctx.run([sys.executable, "-I", "-m", "unittest", "discover", "-s", "ops/tests", "-t", "."], timeout=120)
    return r["returncode"]
