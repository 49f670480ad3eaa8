"""A tiny export folder in the production layout, for the tests."""

import json
import os
import tempfile

T0 = 1_702_857_600.0  # 2023-12-18T00:00:00Z


def build():
    """p_000001 changed twice (v2, v3; v2 redelivered late, skipped), p_000002 deleted while the stream lagged 90 s;
    one reindex swapped, one aborted; three sampled answers, one stale."""
    d = tempfile.mkdtemp(prefix="searchops-")
    for sub in ("cdc", "indexer", "search"):
        os.makedirs(os.path.join(d, sub))
    changes = [{"change": "ch_a", "lsn": 1, "ts": T0 + 10, "op": "upsert", "doc": "p_000001", "version": 2,
                "row": {"title": "Osk lamp"}},
               {"change": "ch_b", "lsn": 2, "ts": T0 + 20, "op": "delete", "doc": "p_000002", "version": 4,
                "row": None},
               {"change": "ch_c", "lsn": 3, "ts": T0 + 30, "op": "upsert", "doc": "p_000001", "version": 3,
                "row": {"title": "Osk lamp, brass"}}]
    with open(os.path.join(d, "cdc", "changes-d0-h00.jsonl"), "w") as f:
        f.writelines(json.dumps(c) + "\n" for c in changes + changes[:1])
    with open(os.path.join(d, "indexer", "ix1-d0-h00.log"), "w") as f:
        f.write("%.3f ix1 write p_000001 2 products-0412\n" % (T0 + 10.5))
        f.write("%.3f ix1 write p_000001 3 products-0412,products-0413\n" % (T0 + 31))
        f.write("%.3f ix1 skip p_000001 2 older\n" % (T0 + 200))
    with open(os.path.join(d, "indexer", "ix2-d0-h00.log"), "w") as f:
        f.write("%.3f ix2 delete p_000002 4 products-0412,products-0413\n" % (T0 + 110))
    with open(os.path.join(d, "indexer", "reindex-d0.log"), "w") as f:
        f.write("%.3f start products-0413 from products-0412\n" % (T0 + 5))
        f.write("%.3f page products-0413 p_000001 p_000500\n" % (T0 + 40))
        f.write("%.3f swap products products-0412 products-0413\n" % (T0 + 125))
        f.write("%.3f start products-0414 from products-0413\n" % (T0 + 1000))
        f.write("%.3f abort products-0414 disk_watermark\n" % (T0 + 1600))
    with open(os.path.join(d, "search", "queries-d0-h00.csv"), "w") as f:
        f.write("ts,node,query,rank,doc,version\n")
        f.write("%.3f,s1,lamp,1,p_000001,3\n" % (T0 + 40))
        f.write("%.3f,s2,lamp,2,p_000002,3\n" % (T0 + 60))
        f.write("%.3f,s2,brass lamp,1,p_000001,2\n" % (T0 + 30.5))
    return d
