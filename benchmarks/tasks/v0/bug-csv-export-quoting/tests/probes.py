"""Probes of bug-csv-export-quoting: the CSV text the export produces, parsed back (bench/verdict_runner.py)."""

import csv
import io
import json
import os
import sys
import tempfile

ROWS = [(1, "Ann Lee", "ann@example.com", "pro"), (2, "Lopez, Maria", "maria@example.com", "team"),
        (3, 'Dwayne "The Rock" J.', "rock@example.com", "free"), (4, "Line\nBreak", "lb@example.com", "pro"),
        (5, "Zoë, Ünal", "zu@example.com", "free")]


def _users(ctx):
    User = ctx.load("userexport").User
    return [User(*row) for row in ROWS]


def probe_round_trip_of_tricky_names(ctx):
    return list(csv.reader(io.StringIO(ctx.load("userexport").to_csv(_users(ctx)))))


def probe_columns_per_row(ctx):
    return [len(row) for row in csv.reader(io.StringIO(ctx.load("userexport").to_csv(_users(ctx))))]


def probe_plain_rows_are_unquoted(ctx):
    m = ctx.load("userexport")
    return m.to_csv([m.User(7, "Bo Chen", "bo@example.com", "free")]).splitlines()[1]


def probe_cli_writes_a_parseable_file(ctx):
    d = tempfile.mkdtemp(dir=ctx.tmp)
    src, out = os.path.join(d, "u.json"), os.path.join(d, "out.csv")
    with open(src, "w") as f:
        json.dump([{"id": i, "name": n, "email": e, "plan": p} for i, n, e, p in ROWS], f)
    run = ctx.run([sys.executable, "-m", "userexport", src, out])
    if run["returncode"] != 0 or not os.path.exists(out):
        return {"returncode": run["returncode"]}
    with open(out, newline="", encoding="utf-8") as f:
        return {"returncode": 0, "names": [r[1] for r in list(csv.reader(f))[1:]]}
