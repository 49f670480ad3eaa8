"""Probes of refactor-global-state: independent registries and the module-level default (bench/verdict_runner.py)."""

import ast
import sys


def probe_instances_are_independent(ctx):
    metrics = ctx.load("telemetry.metrics")
    metrics.reset()
    a, b = metrics.Registry(), metrics.Registry()
    out = [a.incr("x"), a.incr("x", 4), b.get("x")]
    b.observe("t", 0.5)
    b.observe("t", 1.5)
    return out + [b.timings("t"), a.timings("t"), metrics.get("x"), ctx.raises(ValueError, a.observe, "t", -1)]


def probe_snapshot_is_a_copy_and_reset(ctx):
    metrics = ctx.load("telemetry.metrics")
    metrics.reset()
    r = metrics.Registry()
    r.incr("c")
    r.observe("t", 1)
    snap = r.snapshot()
    snap["timings"]["t"].append(9)
    out = [r.snapshot()]
    r.reset()
    return out + [r.snapshot()]


def probe_module_functions_use_default(ctx):
    metrics, http = ctx.load("telemetry.metrics"), ctx.load("telemetry.http")
    metrics.reset()
    out = [type(metrics.DEFAULT) is metrics.Registry or isinstance(metrics.DEFAULT, metrics.Registry)]
    metrics.incr("m", 2)
    metrics.observe("lat", 0.25)
    out += [metrics.DEFAULT.get("m"), metrics.timings("lat")]
    http.handle({}, lambda r: "ok")
    out += [metrics.DEFAULT.get("http.requests"), metrics.snapshot()["counters"]]
    metrics.reset()
    return out + [metrics.get("m")]


def probe_no_globals(ctx):
    tree = ast.parse(open(ctx.path("telemetry", "metrics.py")).read())
    return len([n for n in ast.walk(tree) if isinstance(n, ast.Global)])


def probe_visible_tests_pass(ctx):
    return ctx.run([sys.executable, "-m", "unittest", "discover", "-s", "tests", "-t", "."])["returncode"] == 0
