"""Probes of evidence-sensor-bridge-wiped: the detector's answers on fresh weeks, on the repository's week and on
hand-made folders (bench/verdict_runner.py; the folders come from the runner's setup.py)."""

import os
import re
import sys


def _found(ctx, folder):
    return ctx.load("detect").lost_readings(folder)


def _labels(ctx, week):
    flagged = set(_found(ctx, week["dir"]))
    return [reading in flagged for reading in week["ids"]]


def probe_detector_fresh_week_a(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_a"])


def probe_detector_fresh_week_b(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_b"])


def probe_detector_repository_week(ctx):
    logs = ctx.path("logs")
    readings = set()
    pattern = re.compile(r"\[gateway\] reading (\S+) sensor ")
    for name in os.listdir(os.path.join(logs, "gateways")):
        with open(os.path.join(logs, "gateways", name)) as f:
            for line in f:
                m = pattern.search(line)
                if m:
                    readings.add(m.group(1))
    return _labels(ctx, {"dir": logs, "ids": sorted(readings)})


def _case(ctx, name):
    return sorted(set(_found(ctx, ctx.fixture["cases"][name])))


def probe_wiped_queue(ctx):
    return _case(ctx, "wiped_queue")


def probe_queued_then_forwarded(ctx):
    return _case(ctx, "queued_then_forwarded")


def probe_saved_then_forwarded(ctx):
    return _case(ctx, "saved_then_forwarded")


def probe_rejected_sensor_fault(ctx):
    return _case(ctx, "rejected_sensor_fault")


def probe_queued_when_the_logs_end(ctx):
    return _case(ctx, "queued_when_the_logs_end")


def probe_dup_resend_and_excursion(ctx):
    return _case(ctx, "dup_resend_and_excursion")


def probe_restart_on_another_node(ctx):
    return _case(ctx, "restart_on_another_node")


def probe_queued_in_the_restart_second(ctx):
    return _case(ctx, "queued_in_the_restart_second")


def probe_queued_twice_then_wiped(ctx):
    return _case(ctx, "queued_twice_then_wiped")


def probe_same_mid_two_gateways(ctx):
    return _case(ctx, "same_mid_two_gateways")


def probe_saved_across_days(ctx):
    return _case(ctx, "saved_across_days")


def probe_repeated_lines_and_reconnects(ctx):
    return _case(ctx, "repeated_lines_and_reconnects")


def probe_repository_tests_pass(ctx):
    r = ctx.run([sys.executable, "-I", "-m", "unittest", "discover", "-s", "ops/tests", "-t", "."], timeout=120)
    return r["returncode"]
