"""Parent-side setup of evidence-ratelimit-shared-bucket (run by the verdict runner before any task code, and by the
authoring tool for the hidden values): two fresh weeks of logs with other seeds and other fix times, and small
hand-made log folders for the cases a detector must get right; the labels never reach the child."""

import importlib.util
import os
import random
import tempfile

WEEKS = {"fresh_week_a": (1001, 1000, 0.2), "fresh_week_b": (1002, 1000, 0.26)}  # seed, API keys, fix time
REPO_WEEK = (5, 1000)  # what environment/generate.py wrote into the repository


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_evidence", os.path.join(tests, "gen_evidence.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cases(gen, root):
    """The hand-made folders: {case: folder}."""
    m = gen.START + 3 * 3600.0  # the start of a calendar minute
    since = gen.START - 86400 * 30
    cases = {}

    def write(name, lines, plans, orgs):
        cases[name] = os.path.join(root, name)
        gen.write_folder(cases[name], lines, plans, orgs, random.Random(9))

    def run(key, t0, n, status=200, reason=None, step=1.0):
        return [gen.gateway_line(t0 + i * step, "gw-1", "q%s%03d%d" % (key, i, int(t0)), key, "GET /v2/items",
                                 status, reason, 20) for i in range(n)]

    # upgraded from 20 to 60 at m + 600: refused at 20 before the upgrade (right), at 30 after it (wrong)
    plans = {"ak_up": [{"from": since, "limit": 20}, {"from": m + 600, "limit": 60}],
             "ak_mate": [{"from": since, "limit": 120}]}
    write("plan_changed", run("ak_up", m, 20) + run("ak_up", m + 25, 1, 429, "rate_limit"),
          plans, {"ak_up": "org_u", "ak_mate": "org_u"})
    write("plan_changed_after", run("ak_up", m + 660, 30) + run("ak_up", m + 700, 1, 429, "rate_limit") +
          run("ak_mate", m + 661, 40, step=0.5), plans, {"ak_up": "org_u", "ak_mate": "org_u"})
    # 18 served and 2 failed upstream count as 20 admitted: refused rightly; another key refused under its limit
    plans = {"ak_five": [{"from": since, "limit": 20}], "ak_bus": [{"from": since, "limit": 20}],
             "ak_mate": [{"from": since, "limit": 120}]}
    write("upstream_errors_count",
          run("ak_five", m, 18) + run("ak_five", m + 20, 2, 503) + run("ak_five", m + 30, 1, 429, "rate_limit") +
          run("ak_bus", m, 12) + run("ak_mate", m, 30, step=0.5) + run("ak_bus", m + 40, 1, 429, "rate_limit"),
          plans, {"ak_five": "org_f", "ak_bus": "org_b", "ak_mate": "org_b"})
    # 15 admitted at the end of one minute, 10 at the start of the next, refused there at 10: wrong
    plans = {"ak_edge": [{"from": since, "limit": 20}], "ak_mate": [{"from": since, "limit": 120}]}
    write("calendar_minute",
          run("ak_edge", m + 45, 15) + run("ak_edge", m + 60, 10, step=0.5) + run("ak_mate", m + 60, 20, step=0.5) +
          run("ak_edge", m + 70, 1, 429, "rate_limit"), plans, {"ak_edge": "org_e", "ak_mate": "org_e"})
    # load shedding under the limit; a key whose log lines repeat, refused at 19 distinct requests: wrong
    plans = {"ak_shed": [{"from": since, "limit": 60}], "ak_dup": [{"from": since, "limit": 20}],
             "ak_mate": [{"from": since, "limit": 120}]}
    dup = run("ak_dup", m, 19)
    write("overload_and_repeated_lines",
          run("ak_shed", m, 5) + run("ak_shed", m + 10, 1, 429, "overload") + dup + [dict(x) for x in dup[:4]] +
          run("ak_mate", m, 10) + run("ak_dup", m + 40, 1, 429, "rate_limit"),
          plans, {"ak_shed": "org_s", "ak_dup": "org_d", "ak_mate": "org_d"})
    return cases


def fixture(ctx):
    """Folders of the fresh weeks and of the hand-made cases (the child gets paths, never labels)."""
    gen = _gen(ctx["tests"])
    out = {}
    for name, (seed, count, fix) in WEEKS.items():
        folder = os.path.join(ctx["tmp"], name)
        out[name] = {"dir": folder, "ids": sorted(gen.write_logs(folder, seed=seed, count=count, fixed_at_frac=fix))}
    out["cases"] = _cases(gen, os.path.join(ctx["tmp"], "cases"))
    return out


def _week_labels(gen, **kwargs):
    """Writes one week into a temporary folder, removed on return, and returns its true labels."""
    with tempfile.TemporaryDirectory(prefix="week-") as folder:
        return gen.write_logs(folder, **kwargs)


def expected(ctx):
    """The true labels of the fresh weeks and of the repository's week (F1 >= 0.9 needed on each)."""
    gen = _gen(ctx["tests"])
    out = {}
    for name, (seed, count, fix) in list(WEEKS.items()) + [("repository_week", REPO_WEEK + (None,))]:
        labels = _week_labels(gen, seed=seed, count=count, fixed_at_frac=fix)
        assert 0.01 <= sum(labels.values()) / len(labels) <= 0.03, (name, sum(labels.values()))
        out["detector_" + name] = {"labels": [labels[k] for k in sorted(labels)], "f1": 0.9}
    return out
