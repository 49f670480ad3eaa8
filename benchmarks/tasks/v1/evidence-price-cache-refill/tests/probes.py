"""Probes of evidence-price-cache-refill: the detector's answers on fresh weeks, on the repository's week and on
hand-made folders (bench/verdict_runner.py; the folders come from the runner's setup.py)."""

import json
import os
import sys


def _found(ctx, folder):
    return ctx.load("detect").stale_priced_orders(folder)


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
            orders.update(json.loads(line)["order"] for line in f)
    return _labels(ctx, {"dir": logs, "ids": sorted(orders)})


def _case(ctx, name):
    return sorted(set(_found(ctx, ctx.fixture["cases"][name])))


def probe_quote_and_bus_lag(ctx):
    return _case(ctx, "quote_and_bus_lag")


def probe_scheduled_and_lagging_replica(ctx):
    return _case(ctx, "scheduled_and_lagging_replica")


def probe_repository_tests_pass(ctx):
    r = ctx.run([sys.executable, "-I", "-m", "unittest", "discover", "-s", "priceops/tests", "-t", "."], timeout=120)
    return r["returncode"]
