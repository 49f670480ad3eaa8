"""Parent-side setup of evidence-meter-fallback-hour (run by the verdict runner before any task code, and by the
authoring tool for the hidden values): two fresh weeks with other seeds and other fix times, and small hand-made
folders for the cases a detector must get right; the labels never reach the child."""

import importlib.util
import json
import os
import tempfile

WEEKS = {"fresh_week_a": (22, 500, 1_698_900_000), "fresh_week_b": (23, 500, 1_699_500_000)}  # seed, meters, fix
REPO_WEEK = (7, 900, None)  # what environment/generate.py wrote into the repository


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_evidence", os.path.join(tests, "gen_evidence.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(folder, meters, intervals):
    """meters {id: [(local, offset, counter)]}, intervals [(meter, id, start, end, kwh)]."""
    os.makedirs(os.path.join(folder, "meters"))
    os.makedirs(os.path.join(folder, "ingest"))
    for mid, rows in meters.items():
        with open(os.path.join(folder, "meters", mid + ".csv"), "w") as f:
            f.write("local_time,utc_offset,kwh_counter\n" + "".join("%s,%s,%.3f\n" % r for r in rows))
    with open(os.path.join(folder, "ingest", "ingest-d0.jsonl"), "w") as f:
        f.writelines(json.dumps({"meter": m, "interval": i, "start": s, "end": e, "kwh": k}) + "\n"
                     for m, i, s, e, k in intervals)
    with open(os.path.join(folder, "registry.json"), "w") as f:
        json.dump({m: {"zone": "Europe/Berlin", "firmware": "1.4"} for m in meters}, f)


def _series(mid, counters, start=1_698_537_600, offset="", tag="x"):
    """Rows and exact intervals of a meter reporting `counters` every 15 minutes (a drop: the meter replaced)."""
    rows = [("d0 %02d:%02d" % divmod(15 * k, 60), offset, c) for k, c in enumerate(counters)]
    intervals = []
    for k in range(1, len(counters)):
        kwh = round(counters[k] - counters[k - 1] if counters[k] >= counters[k - 1] else counters[k], 3)
        intervals.append((mid, "%s%s%03d" % (tag, mid, k), start + 900 * (k - 1), start + 900 * k, kwh))
    return rows, intervals


def _cases(root):
    cases = {}
    base = [10.0 + 0.25 * k for k in range(12)]
    # a replaced meter: the counter drops to 0.1, then climbs; billed exactly
    rows, iv = _series("mrep", base[:6] + [0.1, 0.4, 0.9, 1.3])
    _write(os.path.join(root, "replaced"), {"mrep": rows}, iv)
    cases["replaced_meter_is_fine"] = os.path.join(root, "replaced")
    # every ingest line logged twice under the same ids
    rows, iv = _series("mdup", base)
    _write(os.path.join(root, "dups"), {"mdup": rows}, iv + iv[::-1])
    cases["repeated_lines_are_fine"] = os.path.join(root, "dups")
    # four intervals recorded again under new ids: an hour billed twice
    rows, iv = _series("mtwice", base)
    _, again = _series("mtwice", base, tag="y")
    _write(os.path.join(root, "twice"), {"mtwice": rows}, iv + again[4:8])
    cases["hour_billed_twice"] = os.path.join(root, "twice")
    # one extra interval of 0.01 kWh under a new id; a replaced meter; a duplicated line: only the first is wrong
    r1, i1 = _series("msmall", [5.0 + 0.01 * k for k in range(8)])
    r2, i2 = _series("mswap", [3.0, 3.5, 0.2, 0.7])
    r3, i3 = _series("mcopy", [1.0, 1.1, 1.3])
    _write(os.path.join(root, "mixed"), {"msmall": r1, "mswap": r2, "mcopy": r3},
           i1 + [("msmall", "zzz", i1[2][2], i1[2][3], 0.01)] + i2 + i3 + i3[:1])
    cases["mixed"] = os.path.join(root, "mixed")
    return cases


def fixture(ctx):
    """Folders of the fresh weeks and of the hand-made cases (the child gets paths, never labels)."""
    gen = _gen(ctx["tests"])
    out = {}
    for name, (seed, count, fix) in WEEKS.items():
        folder = os.path.join(ctx["tmp"], name)
        out[name] = {"dir": folder, "ids": sorted(gen.write_logs(folder, seed=seed, count=count, fixed_at=fix))}
    out["cases"] = _cases(os.path.join(ctx["tmp"], "cases"))
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
        out["detector_" + name] = {"labels": [labels[m] for m in sorted(labels)], "f1": 0.9}
    return out
