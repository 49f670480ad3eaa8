"""Probes of evidence-fulfil-before-commit: the detector's answers on fresh weeks, on the repository's week and on
hand-made folders (bench/verdict_runner.py; the folders come from the runner's setup.py)."""

import json
import os
import sys


def _found(ctx, folder):
    return ctx.load("detect").unshipped_paid_orders(folder)


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
    for name in os.listdir(os.path.join(logs, "checkout")):
        with open(os.path.join(logs, "checkout", name)) as f:
            for line in f:
                if '"order.saved"' in line:
                    orders.add(json.loads(line)["order"])
    return _labels(ctx, {"dir": logs, "ids": sorted(orders)})


def _case(ctx, name):
    return sorted(set(_found(ctx, ctx.fixture["cases"][name])))


def probe_paid_read_before_commit(ctx):
    return _case(ctx, "paid_read_before_commit")


def probe_declined_read_as_pending(ctx):
    return _case(ctx, "declined_read_as_pending")


def probe_new_order_retried(ctx):
    return _case(ctx, "new_order_retried")


def probe_pending_skips_only(ctx):
    return _case(ctx, "pending_skips_only")


def probe_paid_after_fix(ctx):
    return _case(ctx, "paid_after_fix")


def probe_warehouse_outage_replayed(ctx):
    return _case(ctx, "warehouse_outage_replayed")


def probe_hour_boundary_repeated(ctx):
    return _case(ctx, "hour_boundary_repeated")


def probe_declined_new_order(ctx):
    return _case(ctx, "declined_new_order")


def probe_mixed_hour(ctx):
    return _case(ctx, "mixed_hour")


def probe_slow_commit_read_after(ctx):
    return _case(ctx, "slow_commit_read_after")


def probe_two_paylater_one_hurt(ctx):
    return _case(ctx, "two_paylater_one_hurt")


def probe_pending_message_late(ctx):
    return _case(ctx, "pending_message_late")


def probe_repository_tests_pass(ctx):
    r = ctx.run([sys.executable, "-I", "-m", "unittest", "discover", "-s", "ops/tests", "-t", "."], timeout=120)
    return r["returncode"]
