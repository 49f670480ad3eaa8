"""Parent-side setup of evidence-webhook-redirect-done (run by the verdict runner before any task code, and by the
authoring tool for the hidden values): two fresh weeks with other seeds and other fix times, and small hand-made
folders for the cases a detector must get right; the labels never reach the child."""

import importlib.util
import os
import random
import tempfile

WEEKS = {"fresh_week_a": (51, 8_000, 1_702_330_000), "fresh_week_b": (52, 8_000, 1_702_345_000)}  # seed, events, fix
REPO_WEEK = (5, 30_000, None)  # what environment/generate.py wrote into the repository
EP, URL, NEW = "ep_0007", "https://hooks.acme7.io/webhooks", "https://hooks2.acme7.io/v2/events"


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_evidence", os.path.join(tests, "gen_evidence.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cases(gen, root):
    """The hand-made folders: {case: folder}. One endpoint that moved to NEW; deliveries two hours into the week."""
    t0 = gen.START + 7200
    cases = {}

    def write(name, deliveries):
        lines, journal, events = [], [], []
        for did, attempts, state in deliveries:
            eid = "evt_" + did[3:]
            events.append({"id": eid, "type": "invoice.paid", "tenant": "acme7", "created": t0, "data": {}})
            journal.append((t0 + 0.01, did, eid, EP, "queued", 0))
            n = 0
            for dt, worker, tr, status, via in attempts:
                url = NEW if via else URL
                lines.append((t0 + dt, "%s %s %s %s %s try=%s POST %s -> %s 40ms%s" % (
                    gen.iso(t0 + dt), worker, did, eid, EP, tr, url, status, " via=%s" % via if via else "")))
                n = tr if isinstance(tr, int) else n
            end = state[1]
            journal.append((t0 + end, did, eid, EP, state[0], n))
        cases[name] = os.path.join(root, name)
        gen.write_folder(cases[name], events, lines, journal, random.Random(2))

    # a redirect marked delivered, then redelivered from the dashboard a day later (followed, 200): hurt all the same;
    # a redirect followed to a 200; a dead letter; a lease race answered 409 after another worker's 200
    write("redeliver_follow_dead_race", [
        ("dl_moved", [(1.0, "w1", 1, "308", None), (86400.0, "w3", "manual", "308", None),
                      (86400.1, "w3", "manual", "200", "308")], ("delivered", 1.05)),
        ("dl_follow", [(2.0, "w2", 1, "307", None), (2.2, "w2", 1, "200", "307")], ("delivered", 2.3)),
        ("dl_dead", [(3.0 + 600 * k, "w%d" % (1 + k % 4), k + 1, "503", None) for k in range(8)],
         ("dead", 3.0 + 600 * 7 + 0.1)),
        ("dl_race", [(24.4, "w2", 2, "200", None), (31.0, "w1", 1, "409", None)], ("delivered", 24.5))])
    # a 301 after a 503 (hurt); a 2xx logged by another worker in the next hour's file just before the mark (fine);
    # a 410 failure; a 200 on the retry after a timeout
    write("retry_then_redirect", [
        ("dl_retry_moved", [(5.0, "w4", 1, "503", None), (36.0, "w2", 2, "301", None)], ("delivered", 36.2)),
        ("dl_next_hour", [(3598.0, "w1", 1, "timeout", None), (3629.9, "w3", 2, "204", None)],
         ("delivered", 3630.0)),
        ("dl_gone", [(7.0, "w1", 1, "410", None)], ("failed", 7.1)),
        ("dl_retried", [(8.0, "w2", 1, "timeout", None), (40.0, "w4", 2, "200", None)], ("delivered", 40.1))])
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
