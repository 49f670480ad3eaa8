"""Parent-side setup of evidence-search-reindex-lost (run by the verdict runner before any task code, and by the
authoring tool for the hidden values): two fresh weeks with other seeds and other fix times, and small hand-made
folders for the cases a detector must get right; the labels never reach the child."""

import importlib.util
import os
import random
import tempfile

WEEKS = {"fresh_week_a": (71, 40_000, 1_703_180_000), "fresh_week_b": (72, 40_000, 1_703_200_000)}  # seed, changes, fix
REPO_WEEK = (7, 60_000, None)  # what environment/generate.py wrote into the repository


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_evidence", os.path.join(tests, "gen_evidence.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cases(gen, root):
    """The hand-made folders: {case: folder}, two hours into the week."""
    t0 = gen.START + 7200
    cases = {}

    def write(name, changes, writes, reindex, queries=()):
        rows, lines = [], []
        for k, (cid, doc, version, dt, op) in enumerate(changes):
            rows.append({"change": cid, "lsn": 5000 + k, "ts": t0 + dt, "op": op, "doc": doc, "version": version,
                         "row": None if op == "delete" else {"title": "Osk lamp", "price_cents": 1999}})
        rows += [dict(r) for r in rows if r["change"] == "ch_lost"]  # delivered twice
        for dt, doc, version, kind, targets in writes:
            ix = "ix%d" % (2 - int(doc[2:]) % 2)
            text = ("%.3f %s skip %s %d older" % (t0 + dt, ix, doc, version) if kind == "skip" else
                    "%.3f %s %s %s %d %s" % (t0 + dt, ix, kind, doc, version, targets))
            lines.append((t0 + dt, text))
        rlines = [(t0 + dt, "%.3f %s" % (t0 + dt, text)) for dt, text in reindex]
        qrows = [(t0 + dt, "s1", "oak lamp", 1, doc, version) for dt, doc, version in queries]
        cases[name] = os.path.join(root, name)
        gen.write_folder(cases[name], rows, lines, rlines, qrows, random.Random(3))

    old, new, next_ = "products-0412", "products-0413", "products-0414"
    # a reindex read page 1 at +100 and page 2 at +200, then swapped; a second one aborted. Lost: a change committed
    # after its page was read and written to the old index only; also a delete. Fine: a change committed before its
    # page was read but written after it (the stream lagged), a change to a page read later, a change after the
    # swap, a change during the aborted reindex
    write("backlog_later_page_abort",
          [("ch_lost", "p_000010", 3, 150, "upsert"), ("ch_backlog", "p_000020", 2, 90, "upsert"),
           ("ch_later_page", "p_000600", 2, 150, "upsert"), ("ch_after_swap", "p_000030", 4, 310, "upsert"),
           ("ch_aborted", "p_000040", 2, 1200, "upsert"), ("ch_delete_lost", "p_000050", 5, 180, "delete")],
          [(150.8, "p_000010", 3, "write", old), (160.0, "p_000020", 2, "write", old),
           (151.0, "p_000600", 2, "write", old), (311.0, "p_000030", 4, "write", new),
           (1201.0, "p_000040", 2, "write", new), (181.0, "p_000050", 5, "delete", old)],
          [(0, "start %s from %s" % (new, old)), (100, "page %s p_000001 p_000500" % new),
           (200, "page %s p_000501 p_001000" % new), (300, "swap products %s %s" % (old, new)),
           (1000, "start %s from %s" % (next_, new)), (1100, "page %s p_000001 p_000500" % next_),
           (1300, "abort %s operator" % next_)],
          queries=[(170, "p_000020", 1), (400, "p_000010", 2)])
    # after the fix: a change written to both indexes; a lost change whose older version was redelivered (skipped)
    write("dual_write_and_skip",
          [("ch_dual", "p_000005", 2, 100, "upsert"), ("ch_v2", "p_000007", 2, 20, "upsert"),
           ("ch_lost_v3", "p_000007", 3, 120, "upsert")],
          [(100.5, "p_000005", 2, "write", "%s,%s" % (old, new)), (20.4, "p_000007", 2, "write", old),
           (121.0, "p_000007", 3, "write", old), (130.0, "p_000007", 2, "skip", old)],
          [(0, "start %s from %s" % (new, old)), (50, "page %s p_000001 p_000500" % new),
           (400, "swap products %s %s" % (old, new))])
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
