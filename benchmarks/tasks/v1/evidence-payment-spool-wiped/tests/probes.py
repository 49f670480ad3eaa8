"""Probes of evidence-payment-spool-wiped: the detector's answers on fresh weeks, on the repository's week and on
hand-made folders (bench/verdict_runner.py; the folders come from the runner's setup.py)."""

import json
import os
import sys


def _found(ctx, folder):
    return ctx.load("detect").lost_payments(folder)


def _labels(ctx, week):
    flagged = set(_found(ctx, week["dir"]))
    return [order in flagged for order in week["ids"]]


def probe_detector_fresh_week_a(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_a"])


def probe_detector_fresh_week_b(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_b"])


def probe_detector_repository_week(ctx):
    logs = ctx.path("logs")
    orders = set()
    for name in os.listdir(os.path.join(logs, "orders")):
        with open(os.path.join(logs, "orders", name)) as f:
            for line in f:
                if '"order.created"' in line:
                    orders.add(json.loads(line)["order_id"])
    return _labels(ctx, {"dir": logs, "ids": sorted(orders)})


def _case(ctx, name):
    return sorted(set(_found(ctx, ctx.fixture["cases"][name])))


def probe_wiped_spool(ctx):
    return _case(ctx, "wiped_spool")


def probe_spooled_then_delivered(ctx):
    return _case(ctx, "spooled_then_delivered")


def probe_handed_over_then_delivered(ctx):
    return _case(ctx, "handed_over_then_delivered")


def probe_rejected_cancelled(ctx):
    return _case(ctx, "rejected_cancelled")


def probe_spooled_when_the_logs_end(ctx):
    return _case(ctx, "spooled_when_the_logs_end")


def probe_gift_card_and_backlog(ctx):
    return _case(ctx, "gift_card_and_backlog")


def probe_restart_on_another_node(ctx):
    return _case(ctx, "restart_on_another_node")


def probe_spooled_in_the_restart_second(ctx):
    return _case(ctx, "spooled_in_the_restart_second")


def probe_spooled_twice_then_wiped(ctx):
    return _case(ctx, "spooled_twice_then_wiped")


def probe_survived_a_restart(ctx):
    return _case(ctx, "survived_a_restart")


def probe_handed_over_next_day(ctx):
    return _case(ctx, "handed_over_next_day")


def probe_repeated_lines_and_backlog(ctx):
    return _case(ctx, "repeated_lines_and_backlog")


def probe_repository_tests_pass(ctx):
    r = ctx.run([sys.executable, "-I", "-m", "unittest", "discover", "-s", "ops/tests", "-t", "."], timeout=120)
    return r["returncode"]
