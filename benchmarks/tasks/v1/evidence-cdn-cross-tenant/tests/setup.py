"""Parent-side setup of evidence-cdn-cross-tenant (run by the verdict runner before any task code, and by the
authoring tool for the hidden values): two fresh weeks of logs with other seeds and other fix times, and small
hand-made log folders for the cases a detector must get right; the labels never reach the child."""

import importlib.util
import os
import tempfile
import types

WEEKS = {"fresh_week_a": (1001, 8000, 0.18), "fresh_week_b": (1002, 8000, 0.24)}  # seed, sessions, fix time
REPO_WEEK = (3, 10000)  # what environment/generate.py wrote into the repository


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_evidence", os.path.join(tests, "gen_evidence.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cases(gen, root):
    """The hand-made folders: {case: folder}."""
    t = gen.START + 5 * 3600.0
    cases = {}
    ua = gen.AGENTS[0]
    cat, asset = "/api/v2/catalog/shoes?page=2", "/static/app.js"

    def write(name, edge, origin):
        cases[name] = os.path.join(root, name)
        gen.write_folder(cases[name], types.SimpleNamespace(edge=edge, origin=origin))

    def miss(ts, pop, req, session, tenant, path, tag, scope="tenant", status=200):
        o = gen.origin_line(ts + 0.1, "origin-b", req, tenant, path, status, tag if status == 200 else None, scope,
                            600 if scope == "tenant" else 3600, 100)
        e = gen.edge_line(ts + 0.1, pop, req, session, tenant, path, 200 if status == 200 else 502, "MISS", 5000,
                          tag if status == 200 else "-", 101, ua)
        return e, o

    def hit(ts, pop, req, session, tenant, path, tag, cache="HIT"):
        return gen.edge_line(ts, pop, req, session, tenant, path, 200, cache, 5000, tag, 3, ua)

    # another tenant's catalog served while the edge revalidated it (STALE), then refreshed for this tenant
    e1, o1 = miss(t, "fra1", "e01", "s_a", "t-aaa", cat, "tag-aaa-1")
    e2, o2 = miss(t + 700.05, "fra1", "r02", "s_b", "t-bbb", cat, "tag-bbb-1")
    write("stale_other_tenant", [e1, hit(t + 700, "fra1", "e02", "s_b", "t-bbb", cat, "tag-aaa-1", "STALE"), e2],
          [o1, o2])
    # the tenant's own catalog, an older version still cached after the catalog changed; a shared asset
    e1, o1 = miss(t, "iad1", "e11", "s_c", "t-ccc", cat, "tag-ccc-1")
    e2, o2 = miss(t + 900, "iad1", "e12", "s_d", "t-ccc", cat, "tag-ccc-2")
    e3, o3 = miss(t, "iad1", "e13", "s_c", "t-ccc", asset, "tag-asset", "public")
    write("own_old_version_and_shared_asset",
          [e1, e3, hit(t + 300, "iad1", "e14", "s_e", "t-ccc", cat, "tag-ccc-1"), e2,
           hit(t + 301, "iad1", "e15", "s_f", "t-ddd", asset, "tag-asset")], [o1, o2, o3])
    # two tenants, each with its own entry for the same page (after the fix): each hits its own
    e1, o1 = miss(t, "sin1", "e21", "s_g", "t-ggg", cat, "tag-ggg-1")
    e2, o2 = miss(t + 10, "sin1", "e22", "s_h", "t-hhh", cat, "tag-hhh-1")
    write("own_entries_side_by_side",
          [e1, e2, hit(t + 20, "sin1", "e23", "s_g", "t-ggg", cat, "tag-ggg-1"),
           hit(t + 30, "sin1", "e24", "s_h", "t-hhh", cat, "tag-hhh-1")], [o1, o2])
    # a session that moved to another point of presence after an origin error, and got a leaked page there
    e1, o1 = miss(t, "gru1", "e31", "s_i", "t-iii", cat, None, status=504)
    e2, o2 = miss(t + 5, "fra1", "e32", "s_j", "t-jjj", cat, "tag-jjj-1")
    write("moved_after_origin_error",
          [e1, e2, hit(t + 40, "fra1", "e33", "s_i", "t-iii", cat, "tag-jjj-1"),
           hit(t + 41, "fra1", "e34", "s_i", "t-iii", asset, "tag-asset")],
          [o1, o2, gen.origin_line(t, "origin-c", "e35", "t-jjj", asset, 200, "tag-asset", "public", 3600, 80)])
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
