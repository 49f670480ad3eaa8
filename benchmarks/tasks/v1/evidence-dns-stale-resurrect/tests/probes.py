"""Probes of evidence-dns-stale-resurrect: the detector's answers on fresh weeks, on the repository's week and on
hand-made folders (bench/verdict_runner.py; the folders come from the runner's setup.py)."""

import os
import sys


def _clients(log_dir):
    """Every client id in a week's answer logs."""
    out = set()
    root = os.path.join(log_dir, "resolvers")
    for node in os.listdir(root):
        for name in os.listdir(os.path.join(root, node)):
            with open(os.path.join(root, node, name)) as f:
                out.update(line.split()[2] for line in f if line.strip())
    return sorted(out)


def _labels(ctx, week):
    flagged = set(ctx.load("detect").hurt_clients(week["dir"]))
    return [c in flagged for c in week["ids"]]


def probe_detector_fresh_week_a(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_a"])


def probe_detector_fresh_week_b(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_b"])


def probe_detector_repository_week(ctx):
    logs = ctx.path("logs")
    return _labels(ctx, {"dir": logs, "ids": _clients(logs)})


def _case(ctx, name):
    return sorted(set(ctx.load("detect").hurt_clients(ctx.fixture["cases"][name])))


def probe_rearmed_but_unchanged(ctx):
    return _case(ctx, "rearmed_but_unchanged")


def probe_rearmed_soon_after_change(ctx):
    return _case(ctx, "rearmed_soon_after_change")


def probe_mixed(ctx):
    return _case(ctx, "mixed")


def probe_repository_tests_pass(ctx):
    r = ctx.run([sys.executable, "-I", "-m", "unittest", "discover", "-s", "dnsops/tests", "-t", "."], timeout=120)
    return r["returncode"]
