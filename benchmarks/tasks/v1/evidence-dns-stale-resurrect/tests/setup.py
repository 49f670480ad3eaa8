"""Parent-side setup of evidence-dns-stale-resurrect (run by the verdict runner before any task code, and by the
authoring tool for the hidden values): two fresh weeks with other seeds and other fix times, and small hand-made
folders for the cases a detector must get right; the labels never reach the child."""

import importlib.util
import json
import os
import tempfile

WEEKS = {"fresh_week_a": (23, 500, 1_698_880_000), "fresh_week_b": (24, 500, 1_698_890_000)}  # seed, clients, fix
REPO_WEEK = (10, 900, None)  # what environment/generate.py wrote into the repository
NAME = "api01.example.net"


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_evidence", os.path.join(tests, "gen_evidence.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(folder, answers, fetches, changes, ttl=300):
    """answers [(ts, node, client, answer, ttl, how)], fetches [(ts, node, value or None)], changes [(ts, value)];
    one name, 10.0.0.1 at ts 0."""
    for node in ("r1", "r2"):
        os.makedirs(os.path.join(folder, "resolvers", node))
    os.makedirs(os.path.join(folder, "upstream"))
    os.makedirs(os.path.join(folder, "zone"))
    for node in ("r1", "r2"):
        with open(os.path.join(folder, "resolvers", node, "d0-00.log"), "w") as f:
            f.writelines("%d %s %s %s %s %d %s\n" % (ts, nd, c, NAME, a, left, how)
                         for ts, nd, c, a, left, how in answers if nd == node)
        with open(os.path.join(folder, "upstream", node + ".jsonl"), "w") as f:
            for ts, nd, value in fetches:
                if nd == node:
                    x = {"ts": ts, "node": nd, "name": NAME, "ok": value is not None}
                    x.update({"value": value, "ttl": ttl} if value is not None else {})
                    f.write(json.dumps(x) + "\n")
    with open(os.path.join(folder, "zone", "snapshot.json"), "w") as f:
        json.dump({"ts": 0, "records": {NAME: {"value": "10.0.0.1", "ttl": ttl}}}, f)
    with open(os.path.join(folder, "zone", "changes.jsonl"), "w") as f:
        f.writelines(json.dumps({"ts": ts, "name": NAME, "value": v}) + "\n" for ts, v in changes)


def _cases(root):
    a, b = "10.0.0.1", "10.0.0.2"
    cases = {}
    # an expired entry re-armed after a failed fetch, but the record never changed: nobody got a wrong address
    _write(os.path.join(root, "unchanged"),
           [(10, "r1", "c1", a, 300, "miss"), (400, "r1", "c2", a, 300, "miss"), (500, "r1", "c3", a, 200, "hit")],
           [(10, "r1", a), (400, "r1", None)], [])
    cases["rearmed_but_unchanged"] = os.path.join(root, "unchanged")
    # changed at 250, the refresh at 310 failed and re-armed the old address: c2 and c3 hurt well within a TTL
    # of the change; c1's outdated hit at 260 is still inside the TTL of the fetch at 0
    _write(os.path.join(root, "early"),
           [(0, "r1", "c0", a, 300, "miss"), (260, "r1", "c1", a, 40, "hit"), (310, "r1", "c2", a, 300, "miss"),
            (320, "r1", "c3", a, 290, "hit"), (320, "r1", "c3", a, 290, "hit")],
           [(0, "r1", a), (310, "r1", None)], [(250, b)])
    cases["rearmed_soon_after_change"] = os.path.join(root, "early")
    # r2 fetched the new address at 350; r1's refresh at 400 failed and re-armed the old one (c4, c5); a stale-marked
    # answer (c6) and a SERVFAIL (c7) are what the design allows
    _write(os.path.join(root, "mixed"),
           [(0, "r1", "c1", a, 300, "miss"), (200, "r1", "c2", a, 100, "hit"), (350, "r2", "c3", b, 300, "miss"),
            (400, "r1", "c4", a, 300, "miss"), (450, "r1", "c5", a, 250, "hit"), (1200, "r1", "c6", a, 30, "stale"),
            (1300, "r2", "c7", "SERVFAIL", 0, "fail"), (1300, "r2", "c7", "SERVFAIL", 0, "fail")],
           [(0, "r1", a), (350, "r2", b), (400, "r1", None), (1200, "r1", None), (1300, "r2", None)],
           [(100, b)])
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
        out["detector_" + name] = {"labels": [labels[c] for c in sorted(labels)], "f1": 0.9}
    return out
