"""Parent-side setup of evidence-stream-resume-gap (run by the verdict runner before any task code, and by the
authoring tool for the hidden values): two fresh weeks of logs with other seeds and other fix times, and small
hand-made log folders for the cases a detector must get right; the labels never reach the child."""

import importlib.util
import json
import os
import tempfile

WEEKS = {"fresh_week_a": (1001, 600, 0.12), "fresh_week_b": (1002, 600, 0.10)}  # seed, requests, fix time
REPO_WEEK = (1, 1000)  # what environment/generate.py wrote into the repository


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_evidence", os.path.join(tests, "gen_evidence.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _conn(req, conn, status, sent, resume_from, ts, host="gw-a"):
    return {"ts": ts, "host": host, "req": req, "conn": conn, "status": status, "bytes_sent": sent,
            "resume_from": resume_from, "latency_ms": 120}


def _chunks(conn, first, sizes, t):
    off, out = sum(sizes[:first]), []
    for i in range(first, len(sizes)):
        out.append({"ts": t + i * 0.01, "ev": "chunk", "conn": conn, "i": i, "off": off, "n": sizes[i], "text": "x"})
        off += sizes[i]
    return out


def _write(folder, gateway, workers):
    """A log folder: gateway {file name: lines}, workers {request id: events}, one billing file."""
    for sub in ("gateway", "worker", "billing"):
        os.makedirs(os.path.join(folder, sub))
    for name, lines in gateway.items():
        with open(os.path.join(folder, "gateway", name), "w") as f:
            f.writelines(json.dumps(x) + "\n" for x in lines)
    for rid, events in workers.items():
        with open(os.path.join(folder, "worker", rid + ".jsonl"), "w") as f:
            f.writelines(json.dumps(e) + "\n" for e in events)
    with open(os.path.join(folder, "billing", "billing-d0.csv"), "w") as f:
        f.write("request_id,started,tokens_generated,tokens_billed\n")
        f.writelines("%s,1700000000.0,10,10\n" % rid for rid in sorted(workers))


SIZES = [10] * 30  # 30 chunks of 10 bytes: offsets 0, 10, ..., 290


def _trace(rid, resumes, total=300):
    """Worker events of one request: chunks from 0, then per (conn, off) a resume and the chunks from off."""
    events = [{"ts": 1.0, "ev": "start", "req": rid, "model": "m-small"}] + _chunks(0, 0, SIZES, 1.0)[:10]
    for conn, off in resumes:
        events.append({"ts": 2.0 + conn, "ev": "resume", "conn": conn, "off": off})
        events += _chunks(conn, off // 10, SIZES, 2.0 + conn)
    return events + [{"ts": 9.0, "ev": "end", "total": total}]


def _cases(root):
    """The hand-made folders: {case: folder}."""
    cases = {}
    t = 1700003600.0
    # a gap on the second reconnect only; the first reconnect is exact
    f = cases["second_reconnect_gap"] = os.path.join(root, "second")
    _write(f, {"gw-gw-a-d0-h01.jsonl": [_conn("rq-two", 0, 499, 100, None, t), _conn("rq-two", 1, 499, 50, 100, t + 5),
                                         _conn("rq-two", 2, 200, 40, 255, t + 9)]},
           {"rq-two": _trace("rq-two", [(1, 100), (2, 260)])})
    # the worker restarts before the client's offset: an overlap the client drops
    f = cases["overlap_is_harmless"] = os.path.join(root, "overlap")
    _write(f, {"gw-gw-b-d0-h01.jsonl": [_conn("rq-ovl", 0, 499, 105, None, t), _conn("rq-ovl", 1, 200, 200, 105, t + 3)]},
           {"rq-ovl": _trace("rq-ovl", [(1, 100)])})
    # the reconnect is logged by another host in another hour, twice; it lost bytes 35..39
    f = cases["reconnect_elsewhere_duplicated"] = os.path.join(root, "elsewhere")
    late = _conn("rq-far", 1, 200, 260, 35, t + 3700, host="gw-c")
    _write(f, {"gw-gw-a-d0-h01.jsonl": [_conn("rq-far", 0, 499, 35, None, t)],
               "gw-gw-c-d0-h02.jsonl": [late, dict(late)], "gw-gw-b-d0-h02.jsonl": [dict(late)]},
           {"rq-far": _trace("rq-far", [(1, 40)])})
    # a client that went away and never came back; a duplicated complete request
    f = cases["gave_up_and_duplicates"] = os.path.join(root, "gaveup")
    done = _conn("rq-ok", 0, 200, 300, None, t)
    _write(f, {"gw-gw-a-d0-h01.jsonl": [_conn("rq-gone", 0, 499, 120, None, t), done, dict(done)]},
           {"rq-gone": _trace("rq-gone", [])[:-1], "rq-ok": _trace("rq-ok", [])})
    # three requests: an exact reconnect, a gap, an overlap
    f = cases["mixed"] = os.path.join(root, "mixed")
    _write(f, {"gw-gw-a-d0-h01.jsonl": [_conn("rq-a", 0, 499, 50, None, t), _conn("rq-a", 1, 200, 250, 50, t + 2),
                                         _conn("rq-b", 0, 499, 73, None, t), _conn("rq-b", 1, 200, 220, 73, t + 2),
                                         _conn("rq-c", 0, 499, 91, None, t), _conn("rq-c", 1, 200, 210, 91, t + 2)]},
           {"rq-a": _trace("rq-a", [(1, 50)]), "rq-b": _trace("rq-b", [(1, 80)]), "rq-c": _trace("rq-c", [(1, 90)])})
    return cases


def fixture(ctx):
    """Folders of the fresh weeks and of the hand-made cases (the child gets paths, never labels)."""
    gen = _gen(ctx["tests"])
    out = {}
    for name, (seed, count, fix) in WEEKS.items():
        folder = os.path.join(ctx["tmp"], name)
        out[name] = {"dir": folder, "ids": sorted(gen.write_logs(folder, seed=seed, count=count, fixed_at_frac=fix))}
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
    for name, (seed, count, fix) in list(WEEKS.items()) + [("repository_week", REPO_WEEK + (None,))]:
        labels = _week_labels(gen, seed=seed, count=count, fixed_at_frac=fix)
        assert 0.01 <= sum(labels.values()) / len(labels) <= 0.03, (name, sum(labels.values()))
        out["detector_" + name] = {"labels": [labels[r] for r in sorted(labels)], "f1": 0.9}
    return out
