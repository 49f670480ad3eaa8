"""Parent-side setup of evidence-export-cursor-skip (run by the verdict runner before any task code, and by the
authoring tool for the hidden values): two fresh weeks with other seeds and other fix times, and small hand-made
folders for the cases a detector must get right; the labels never reach the child."""

import importlib.util
import os
import random
import tempfile

WEEKS = {"fresh_week_a": (31, 800, 1_700_600_000), "fresh_week_b": (32, 800, 1_700_560_000)}  # seed, exports, fix
FRESH_TENANTS = 20
REPO_WEEK = (5, 1500, None)  # what environment/generate.py wrote into the repository


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_evidence", os.path.join(tests, "gen_evidence.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(gen, tenant, table, export, limit, fixed, script, lines, cdc):
    """Play one export against a tenant's table: script [(seconds after the case's start, action, argument)] with
    actions page (host), 503 (host), delete (contact id), insert (None)."""
    cur, t0 = None, gen.START + 3600
    for dt, act, arg in script:
        t = t0 + dt
        if act == "delete":
            table.ids.remove(arg)
            cdc.append({"ts": t, "tenant": tenant, "op": "delete", "id": arg})
        elif act == "insert":
            table.ids.append(table.next_id)
            cdc.append({"ts": t, "tenant": tenant, "op": "insert", "id": table.next_id})
            table.next_id += 1
        else:
            kind = "after" if fixed else "offset"
            shown = None if cur is None else gen.cursor(kind, cur)
            if act == "503":
                lines.append(gen.api_line(t + 0.02, arg, tenant, export, shown, limit, 503, None, None, 20))
                continue
            ids, nxt = table.page(cur, limit, fixed)
            lines.append(gen.api_line(t + 0.1, arg, tenant, export, shown, limit, 200,
                                      None if nxt is None else gen.cursor(kind, nxt), ids, 100))
            if nxt is None:
                return
            cur = nxt


def _cases(gen, root):
    """The hand-made folders: {case: folder}. Tenants hold contacts 101..110 at the start; pages of 3."""
    cases = {}

    def write(name, exports, repeat=()):
        lines, cdc, snapshot = [], [], {}
        for tenant, export, fixed, script in exports:
            table = gen._Table(range(101, 111))
            snapshot[tenant] = list(range(101, 111))
            _run(gen, tenant, table, export, 3, fixed, script, lines, cdc)
        lines += [dict(lines[k]) for k in repeat]
        cases[name] = os.path.join(root, name)
        gen.write_folder(cases[name], lines, cdc, snapshot, random.Random(5))

    pages = [(10 * k, "page", "api-1") for k in range(5)]
    # offset cursor, a contact behind it deleted, one more page, then the client gives up: not a finished export
    write("abandoned_after_shift", [("tn_a", "ex_a1", False, pages[:1] + [(5, "delete", 102), (10, "page", "api-2")])])
    # the same deletions under the offset cursor (skips 105 and 108) and under the id cursor (skips nothing)
    script = pages[:1] + [(5, "delete", 102)] + pages[1:2] + [(15, "delete", 104)] + pages[2:]
    write("offset_and_id_cursor", [("tn_b", "ex_b_old", False, script), ("tn_c", "ex_c_new", True, script)])
    # a contact deleted ahead of the cursor, two inserted during the export, a 503 retried, a line shipped twice
    write("ahead_insert_retry",
          [("tn_d", "ex_d1", False, pages[:1] + [(3, "delete", 109), (5, "insert", None), (8, "503", "api-3")]
            + pages[1:3] + [(25, "insert", None), (26, "page", "api-1")])], repeat=(2,))
    # a finished export across an hour boundary and three hosts: one contact skipped behind the offset
    write("across_hours", [("tn_e", "ex_e1", False,
                            [(3590, "page", "api-1"), (3597, "delete", 103), (3605, "page", "api-2"),
                             (3612, "page", "api-3"), (3620, "page", "api-1")])])
    return cases


def fixture(ctx):
    """Folders of the fresh weeks and of the hand-made cases (the child gets paths, never labels)."""
    gen = _gen(ctx["tests"])
    out = {}
    for name, (seed, count, fix) in WEEKS.items():
        folder = os.path.join(ctx["tmp"], name)
        labels = gen.write_logs(folder, seed=seed, count=count, fixed_at=fix, tenants=FRESH_TENANTS)
        out[name] = {"dir": folder, "ids": sorted(labels)}
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
    weeks = [(n, w, FRESH_TENANTS) for n, w in WEEKS.items()] + [("repository_week", REPO_WEEK, 40)]
    for name, (seed, count, fix), tenants in weeks:
        labels = _week_labels(gen, seed=seed, count=count, fixed_at=fix, tenants=tenants)
        assert 0.01 <= sum(labels.values()) / len(labels) <= 0.03, (name, sum(labels.values()))
        out["detector_" + name] = {"labels": [labels[k] for k in sorted(labels)], "f1": 0.9}
    return out
