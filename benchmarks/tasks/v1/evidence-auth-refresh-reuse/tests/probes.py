"""Probes of evidence-auth-refresh-reuse: the detector's answers on fresh weeks, on the repository's week and on
hand-made folders (bench/verdict_runner.py; the folders come from the runner's setup.py)."""

import os
import sys


def _found(ctx, folder):
    return ctx.load("detect").wrongly_revoked_sessions(folder)


def _labels(ctx, week):
    flagged = set(_found(ctx, week["dir"]))
    return [session in flagged for session in week["ids"]]


def probe_detector_fresh_week_a(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_a"])


def probe_detector_fresh_week_b(ctx):
    return _labels(ctx, ctx.fixture["fresh_week_b"])


def probe_detector_repository_week(ctx):
    logs = ctx.path("logs")
    sessions = set()
    for name in os.listdir(os.path.join(logs, "auth")):
        with open(os.path.join(logs, "auth", name)) as f:
            sessions.update(line.split("fam=")[1].split()[0] for line in f)
    return _labels(ctx, {"dir": logs, "ids": sorted(sessions)})


def _case(ctx, name):
    return sorted(set(_found(ctx, ctx.fixture["cases"][name])))


def probe_migration_and_replay(ctx):
    return _case(ctx, "migration_and_replay")


def probe_grace_edge_and_lifetime(ctx):
    return _case(ctx, "grace_edge_and_lifetime")


def probe_repository_tests_pass(ctx):
    r = ctx.run([sys.executable, "-I", "-m", "unittest", "discover", "-s", "authops/tests", "-t", "."], timeout=120)
    return r["returncode"]
