"""Probes of written-tinydb-snapshots: what the workspace's tinydb answers (bench/verdict_runner.py).

Fail-to-pass: after a restore, documents inserted into that table (insert, insert_multiple, upsert, through the
table or the database) get IDs after the highest restored one, as in a table freshly filled with those documents
-- the feature kept the table's next-ID counter from before the restore, so new documents replaced restored ones
(insert_multiple) or were refused as duplicates (insert). Pass-to-pass: what snapshots and restore already did
right (copies, IDs kept, other tables left alone, Documents accepted, persistence), and inserting, searching,
updating and removing as tinydb 4.8.0 answered them.
"""

import os
import sys


def _db(ctx, path=None):
    """A TinyDB of the workspace: in memory, or a JSON file under the child's temporary folder."""
    root = ctx.path(".")
    if root not in sys.path:  # after the standard library, before any installed copy of the package
        site = [i for i, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))]
        sys.path.insert(site[0] if site else len(sys.path), root)
    mod = ctx.load("tinydb")
    if not os.path.realpath(mod.__file__).startswith(os.path.realpath(root) + os.sep):
        raise ImportError("tinydb came from %s, not the workspace" % mod.__file__)
    if path is None:
        return mod.TinyDB(storage=ctx.load("tinydb.storages").MemoryStorage)
    return mod.TinyDB(os.path.join(ctx.tmp, path))


def _rows(table):
    return [[d.doc_id, dict(d)] for d in table.all()]


def _filled(ctx, n=3, path=None):
    db = _db(ctx, path)
    db.insert_multiple({"n": i} for i in range(1, n + 1))
    return db


def probe_insert_after_restore(ctx):
    db = _filled(ctx)
    backup = db.snapshot()
    db.insert_multiple([{"n": 4}, {"n": 5}])
    db.restore(backup)
    out = [db.insert({"n": "new"})]
    return out + [_rows(db)]


def probe_insert_multiple_after_restore(ctx):
    db = _filled(ctx, 5)
    backup = db.snapshot()
    db.truncate()
    db.insert({"n": "tmp"})
    db.restore(backup)
    ids = db.insert_multiple([{"n": "x"}, {"n": "y"}])
    return [ids, _rows(db)]


def probe_restore_smaller_snapshot(ctx):
    db = _filled(ctx, 2)
    backup = db.snapshot()
    db.insert_multiple({"n": i} for i in range(3, 9))
    db.restore(backup)
    return [db.insert({"n": "next"}), len(db)]


def probe_restore_sparse_ids(ctx):
    db = _filled(ctx, 2)
    table = db.table("_default")
    table.restore({1: {"n": 1}, 5: {"n": 5}, 9: {"n": 9}})
    first = table.insert({"n": "a"})
    table.restore({3: {"n": 3}})
    return [first, table.insert({"n": "b"}), _rows(table)]


def probe_restore_to_empty(ctx):
    db = _filled(ctx, 4)
    db.table("_default").restore({})
    return [db.insert({"n": "first"}), _rows(db)]


def probe_table_restore_documents_then_insert(ctx):
    db = _filled(ctx, 6)
    table = db.table("_default")
    kept = table.search(ctx.load("tinydb").where("n") <= 2)
    table.insert({"n": 7})
    restored = table.restore(kept)
    return [restored, table.insert({"n": "after"}), _rows(table)]


def probe_upsert_after_restore(ctx):
    db = _filled(ctx)
    tinydb = ctx.load("tinydb")
    backup = db.snapshot()
    db.insert({"n": 4})
    db.restore(backup)
    return [db.upsert({"n": 10, "k": "new"}, tinydb.where("k") == "new"), _rows(db)]


def probe_named_table_after_restore(ctx):
    db = _db(ctx)
    users = db.table("users")
    users.insert_multiple([{"u": "ann"}, {"u": "bob"}])
    backup = db.snapshot()
    users.insert({"u": "cid"})
    users.remove(doc_ids=[1])
    db.restore(backup)
    return [users.insert({"u": "dan"}), _rows(users)]


def probe_json_file_restore_then_insert(ctx):
    db = _filled(ctx, 3, "store.json")
    backup = db.snapshot()
    db.insert({"n": 4})
    db.restore(backup)
    new_id = db.insert({"n": "new"})
    db.close()
    again = _db(ctx, "store.json")
    rows = _rows(again)
    again.close()
    return [new_id, rows]


def probe_snapshot_contents_and_copy(ctx):
    db = _filled(ctx)
    db.table("other").insert({"deep": {"list": [1]}})
    snap = db.snapshot()
    db.table("other").update({"deep": {"list": [2]}})
    shape = sorted([name, sorted(t)] for name, t in snap.items())
    return [shape, snap["other"][1], snap["_default"][2], type(sorted(snap["_default"])[0]).__name__]


def probe_restore_replaces_contents(ctx):
    db = _filled(ctx, 4)
    backup = db.snapshot()
    db.remove(doc_ids=[2])
    db.update({"n": 40}, doc_ids=[4])
    db.restore(backup)
    backup["_default"][1]["n"] = "changed later"
    return [_rows(db), [d.doc_id for d in db.search(ctx.load("tinydb").where("n") > 2)]]


def probe_restore_other_tables_untouched(ctx):
    db = _db(ctx)
    db.table("a").insert({"a": 1})
    db.table("b").insert({"b": 1})
    db.restore({"a": {10: {"a": 10}}, "c": {2: {"c": 2}}})
    return [sorted(db.tables()), _rows(db.table("a")), _rows(db.table("b")), _rows(db.table("c"))]


def probe_restore_validation(ctx):
    db = _filled(ctx)
    table = db.table("_default")
    return [ctx.message(ValueError, table.restore, [{"n": 1}]), ctx.message(ValueError, table.restore, {1: 5}),
            _rows(table)]


def probe_insert_and_ids(ctx):
    db = _filled(ctx)
    tinydb = ctx.load("tinydb")
    out = [db.insert({"n": 4}), db.insert_multiple([{"n": 5}, {"n": 6}])]
    out.append(db.insert(tinydb.table.Document({"n": 10}, doc_id=10)))
    out.append(db.insert({"n": 11}))
    out.append(ctx.message(ValueError, db.insert, tinydb.table.Document({"n": 0}, doc_id=10)))
    db.remove(doc_ids=[11])
    out.append(db.insert({"n": "after remove"}))
    db.truncate()
    return out + [db.insert({"n": "after truncate"})]


def probe_queries_and_updates(ctx):
    db = _filled(ctx, 5)
    tinydb = ctx.load("tinydb")
    q = tinydb.Query()
    db.update({"even": True}, q.n.test(lambda v: v % 2 == 0))
    removed = db.remove(q.n > 4)
    return [[d.doc_id for d in db.search(q.even == True)], removed, db.count(q.n < 3),  # noqa: E712
            dict(db.get(doc_id=2)), db.contains(doc_id=5), len(db)]


def probe_json_storage_roundtrip(ctx):
    db = _db(ctx, "plain.json")
    db.insert({"a": 1})
    db.table("t").insert_multiple([{"b": 2}, {"b": 3}])
    db.close()
    with open(os.path.join(ctx.tmp, "plain.json")) as f:
        raw = f.read()
    again = _db(ctx, "plain.json")
    out = [raw, sorted(again.tables()), _rows(again.table("t")), again.table("t").insert({"b": 4})]
    again.close()
    return out
