"""Probes of refactor-rename-function: the new name, the deprecated alias and the callers (bench/verdict_runner.py;
areas are compared within 1e-9, see check.json)."""

import re
import sys
import warnings


def probe_new_name(ctx):
    area, shapes = ctx.load("geometry.area"), ctx.load("geometry.shapes")
    polygons = [shapes.rectangle(3, 4), shapes.triangle(4, 3), [(0, 0), (1, 1)], [(0, 0), (0, 2), (2, 2), (2, 0)]]
    return [float(area.polygon_area(p)) for p in polygons]


def probe_alias_warns(ctx):
    area, shapes = ctx.load("geometry.area"), ctx.load("geometry.shapes")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = float(area.calc(shapes.rectangle(2, 5)))
    return [value, any(issubclass(w.category, DeprecationWarning) for w in caught)]


def probe_callers_use_the_new_name(ctx):
    callers = ("geometry/shapes.py", "geometry/report.py")
    out = [re.search(r"\bcalc\b", open(ctx.path(p)).read()) is None for p in callers]
    shapes, report = ctx.load("geometry.shapes"), ctx.load("geometry.report")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        out += [float(shapes.total_area([shapes.rectangle(1, 1), shapes.triangle(2, 2)])),
                "12.00" in report.table({"r": shapes.rectangle(3, 4)})]
    return out


def probe_visible_tests_pass(ctx):
    r = ctx.run([sys.executable, "-W", "error::DeprecationWarning", "-m", "unittest", "discover", "-s", "tests", "-t",
                 "."])
    return r["returncode"] == 0


def probe_cli(ctx):
    r = ctx.run([sys.executable, "-m", "geometry.report", "shapes.json"])
    return [r["returncode"], "6.00" in r["stdout"]]
