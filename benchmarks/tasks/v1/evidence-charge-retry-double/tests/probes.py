"""Probes of evidence-charge-retry-double: the detector's answers on fresh weeks, on the repository's week and on
hand-made log folders (bench/verdict_runner.py; the folders come from the runner's setup.py)."""

import json
import os


def _found(ctx, folder):
    return ctx.load("detect").double_charged(folder)


def _labels(ctx, week):
    flagged = set(_found(ctx, week["dir"]))
    return [key in flagged for key in week["ids"]]


def probe_detector_fresh_week_a(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_a"])


def probe_detector_fresh_week_b(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_b"])


def probe_detector_repository_week(ctx):
    logs = ctx.path("logs")
    keys = set()
    for name in os.listdir(os.path.join(logs, "gateway")):
        with open(os.path.join(logs, "gateway", name)) as f:
            for line in f:
                if "POST /v1/charges" in line:
                    keys.add(json.loads(line)["key"])
    return _labels(ctx, {"dir": logs, "ids": sorted(keys)})


def _case(ctx, name):
    return sorted(set(_found(ctx, ctx.fixture["cases"][name])))


def probe_client_retry_new_request(ctx):
    return _case(ctx, "client_retry_new_request")


def probe_same_shard_retry(ctx):
    return _case(ctx, "same_shard_retry")


def probe_retry_other_shard_deduplicated(ctx):
    return _case(ctx, "retry_other_shard_deduplicated")


def probe_exported_twice_refund_and_repeat(ctx):
    return _case(ctx, "exported_twice_refund_and_repeat")


def probe_across_midnight(ctx):
    return _case(ctx, "across_midnight")


def probe_repository_tests_pass(ctx):
    import sys
    r = ctx.run([sys.executable, "-I", "-m", "unittest", "discover", "-s", "payops/tests", "-t", "."], timeout=120)
    return r["returncode"]
