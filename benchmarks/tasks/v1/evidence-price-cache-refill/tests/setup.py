"""Parent-side setup of evidence-price-cache-refill (run by the verdict runner before any task code, and by the
authoring tool for the hidden values): two fresh weeks with other seeds and other fix times, and small hand-made
folders for the cases a detector must get right; the labels never reach the child."""

import importlib.util
import os
import random
import tempfile

WEEKS = {"fresh_week_a": (61, 15_000, 1_701_800_000), "fresh_week_b": (62, 15_000, 1_701_830_000)}  # seed, orders, fix
REPO_WEEK = (9, 30_000, None)  # what environment/generate.py wrote into the repository
SKU = "SKU-00042"


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_evidence", os.path.join(tests, "gen_evidence.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _order(gen, oid, dt, node, cents, priced=0.0, quote=None):
    t = gen.START + 7200 + dt
    return {"ts": t, "order": oid, "customer": "cu_1", "node": node, "sku": SKU, "qty": 1, "unit_cents": cents,
            "priced_at": t - priced, "quote": quote, "payment": "card"}


def _cases(gen, root):
    """The hand-made folders: {case: folder}. One SKU; its price goes 1999 -> 1799 at 7,200 s into the week (lsn 2)
    after an unrelated change of another SKU (lsn 1)."""
    t0 = gen.START + 7200
    cases = {}

    def line(dt, text):
        return (t0 + dt, "%.3f %s" % (t0 + dt, text))

    def write(name, orders, cache, changes):
        cases[name] = os.path.join(root, name)
        gen.write_folder(cases[name], orders, cache, changes, random.Random(2))

    change = [(1, t0 - 600, "SKU-00007", 500, t0 - 600), (2, t0, SKU, 1799, t0)]
    # a quote priced before the change, ordered after it; and the bus lagging 40 s: pc2 serves 1999 before the
    # invalidation (harmless) and again after it from a replica that had not applied lsn 2 (hurt)
    write("quote_and_bus_lag",
          [_order(gen, "o_quote", 120, "pc1", 1999, priced=300, quote="q_1"), _order(gen, "o_early", 20, "pc2", 1999),
           _order(gen, "o_late", 70, "pc2", 1999), _order(gen, "o_new", 5, "pc1", 1799)],
          [line(-3000, "pc1 fill %s r1 0 1999" % SKU), line(-2000, "pc2 fill %s r2 0 1999" % SKU),
           line(0.4, "pc1 inval %s 2" % SKU), line(0.5, "pc1 fill %s r3 2 1799" % SKU),
           line(40, "pc2 inval %s 2" % SKU), line(40.1, "pc2 fill %s r1 1 1999" % SKU)], change)
    # a change committed now and effective in an hour: 1999 stays right until then; a fill by a replica behind
    # another SKU's change still has the right price
    scheduled = [(1, t0, SKU, 1799, t0 + 3600), (2, t0 + 100, "SKU-00007", 500, t0 + 100)]
    write("scheduled_and_lagging_replica",
          [_order(gen, "o_before", 600, "pc3", 1999), _order(gen, "o_after", 3700, "pc3", 1799),
           _order(gen, "o_lag", 200, "pc4", 1999)],
          [line(-100, "pc3 fill %s r1 0 1999" % SKU), line(150, "pc4 fill %s r2 1 1999" % SKU),
           line(3600.3, "pc3 inval %s 1" % SKU), line(3600.4, "pc3 fill %s r2 2 1799" % SKU),
           line(3600.5, "pc4 inval %s 1" % SKU), line(3600.6, "pc4 fill %s primary 2 1799" % SKU)], scheduled)
    return cases


def fixture(ctx):
    """Folders of the fresh weeks and of the hand-made cases (the child gets paths, never labels)."""
    gen = _gen(ctx["tests"])
    out = {}
    for name, (seed, count, fix) in WEEKS.items():
        folder = os.path.join(ctx["tmp"], name)
        out[name] = {"dir": folder, "ids": sorted(gen.write_logs(folder, seed=seed, count=count, fixed_at=fix))}
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
    for name, (seed, count, fix) in list(WEEKS.items()) + [("repository_week", REPO_WEEK)]:
        labels = _week_labels(gen, seed=seed, count=count, fixed_at=fix)
        assert 0.01 <= sum(labels.values()) / len(labels) <= 0.03, (name, sum(labels.values()))
        out["detector_" + name] = {"labels": [labels[k] for k in sorted(labels)], "f1": 0.9}
    return out
