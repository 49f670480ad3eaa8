"""Probes of evidence-mail-deferred-wiped: the detector's answers on fresh weeks, on the repository's week and on
hand-made folders (bench/verdict_runner.py; the folders come from the runner's setup.py)."""

import json
import os
import sys


def _found(ctx, folder):
    return ctx.load("detect").lost_emails(folder)


def _labels(ctx, week):
    flagged = set(_found(ctx, week["dir"]))
    return [job in flagged for job in week["ids"]]


def probe_detector_fresh_week_a(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_a"])


def probe_detector_fresh_week_b(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_b"])


def probe_detector_repository_week(ctx):
    logs = ctx.path("logs")
    jobs = set()
    for name in os.listdir(os.path.join(logs, "web")):
        with open(os.path.join(logs, "web", name)) as f:
            for line in f:
                if '"email.requested"' in line:
                    jobs.add(json.loads(line)["job_id"])
    return _labels(ctx, {"dir": logs, "ids": sorted(jobs)})


def _case(ctx, name):
    return sorted(set(_found(ctx, ctx.fixture["cases"][name])))


def probe_wiped_deferral(ctx):
    return _case(ctx, "wiped_deferral")


def probe_deferred_then_sent(ctx):
    return _case(ctx, "deferred_then_sent")


def probe_handed_over_then_sent(ctx):
    return _case(ctx, "handed_over_then_sent")


def probe_bounced(ctx):
    return _case(ctx, "bounced")


def probe_deferred_when_the_logs_end(ctx):
    return _case(ctx, "deferred_when_the_logs_end")


def probe_suppressed_and_retried(ctx):
    return _case(ctx, "suppressed_and_retried")


def probe_restart_on_another_node(ctx):
    return _case(ctx, "restart_on_another_node")


def probe_deferral_in_the_restart_second(ctx):
    return _case(ctx, "deferral_in_the_restart_second")


def probe_deferred_twice_then_wiped(ctx):
    return _case(ctx, "deferred_twice_then_wiped")


def probe_survived_a_restart(ctx):
    return _case(ctx, "survived_a_restart")


def probe_handed_over_next_day(ctx):
    return _case(ctx, "handed_over_next_day")


def probe_repeated_lines_mixed(ctx):
    return _case(ctx, "repeated_lines_mixed")


def probe_repository_tests_pass(ctx):
    r = ctx.run([sys.executable, "-I", "-m", "unittest", "discover", "-s", "ops/tests", "-t", "."], timeout=120)
    return r["returncode"]
