"""Parent-side setup of evidence-checkpoint-restore-rollback (run by the verdict runner before any task code, and
by the authoring tool for the hidden values): two fresh weeks of logs with other seeds and other fix times, and
small hand-made log folders for the cases a detector must get right; the labels never reach the child."""

import importlib.util
import os
import random
import tempfile

WEEKS = {"fresh_week_a": (1001, 800, 0.27), "fresh_week_b": (1002, 800, 0.31)}  # seed, jobs, fix time
FRESH_LINES = 60  # step lines per run in the fresh weeks (the repository's week has 250)
REPO_WEEK = (13, 1200)  # what environment/generate.py wrote into the repository


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_evidence", os.path.join(tests, "gen_evidence.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cases(gen, root):
    """The hand-made folders: {case: folder}."""
    t0 = gen.START + 3600.0
    cases = {}

    def new(jid):
        j = gen.Job(random.Random(1), jid, 100)
        j.event(t0, "submit", node="gpu-01", user="ana", steps=9000)
        return j

    def save(j, cid, step, t, done=True, deleted=None):
        j.line(t, "INFO", "checkpoint save started id=%s step=%d" % (cid, step))
        c = {"id": cid, "job": j.jid, "step": step, "started": t, "finished": t + 60 if done else None,
             "deleted": deleted, "bytes": 10**9}
        j.ckpts.append(c)
        if done:
            j.line(t + 60, "INFO", "checkpoint save finished id=%s step=%d" % (cid, step))

    def stop(j, t):
        j.line(t, "WARNING", "received SIGTERM: preempted by scheduler")
        j.event(t, "preempt", node="gpu-01", reason="priority")

    def restore(j, t, ev, cid, step, **kw):
        j.event(t, ev, node="gpu-02", **kw)
        j.line(t + 30, "INFO", "restored checkpoint id=%s step=%d" % (cid, step))

    def write(name, jobs):
        cases[name] = os.path.join(root, name)
        gen.write_folder(cases[name], jobs, random.Random(2))

    # preempted during an upload: one job restored the newest finished (right), one the oldest retained (wrong)
    a, b = new("job-right"), new("job-wrong")
    for j in (a, b):
        for k in range(1, 4):
            save(j, "ck-%s-%d" % (j.jid[4:], k), 1000 * k, t0 + 1000 * k)
        save(j, "ck-%s-4" % j.jid[4:], 4000, t0 + 4000, done=False)
        stop(j, t0 + 4010)
    restore(a, t0 + 5000, "resume", "ck-right-3", 3000)
    restore(b, t0 + 5000, "resume", "ck-wrong-1", 1000)
    write("upload_cut", [a, b])
    # a user goes back to an older checkpoint; the newer ones are deleted; then a resume restores that one
    c = new("job-user")
    for k in range(1, 4):
        save(c, "ck-user-%d" % k, 1000 * k, t0 + 1000 * k, deleted=t0 + 4500 if k > 1 else None)
    stop(c, t0 + 4400)
    restore(c, t0 + 4500, "restart", "ck-user-1", 1000, user="bo", checkpoint="ck-user-1")
    stop(c, t0 + 5000)
    restore(c, t0 + 5600, "resume", "ck-user-1", 1000)
    write("user_restart_then_resume", [c])
    # after a user restart the job trains on; a cut upload and a resume to the restarted checkpoint: wrong
    d = new("job-again")
    for k in range(1, 4):
        save(d, "ck-again-%d" % k, 1000 * k, t0 + 1000 * k, deleted=t0 + 4500 if k == 3 else None)
    stop(d, t0 + 4400)
    restore(d, t0 + 4500, "restart", "ck-again-2", 2000, user="dev", checkpoint="ck-again-2")
    save(d, "ck-again-4", 3000, t0 + 5600)
    save(d, "ck-again-5", 4000, t0 + 6600, done=False)
    stop(d, t0 + 6610)
    restore(d, t0 + 7000, "resume", "ck-again-2", 2000)
    write("restart_then_rollback", [d])
    # preempted before any save, and a plain preemption between saves: nothing to flag
    e, f = new("job-early"), new("job-plain")
    stop(e, t0 + 300)
    e.event(t0 + 900, "resume", node="gpu-03")
    e.line(t0 + 930, "INFO", "no checkpoint found; starting from step 0")
    save(f, "ck-plain-1", 1000, t0 + 1000)
    save(f, "ck-plain-2", 2000, t0 + 2000)
    stop(f, t0 + 2700)
    restore(f, t0 + 3000, "resume", "ck-plain-2", 2000)
    write("early_and_plain", [e, f])
    return cases


def fixture(ctx):
    """Folders of the fresh weeks and of the hand-made cases (the child gets paths, never labels)."""
    gen = _gen(ctx["tests"])
    out = {}
    for name, (seed, count, fix) in WEEKS.items():
        folder = os.path.join(ctx["tmp"], name)
        labels = gen.write_logs(folder, seed=seed, count=count, fixed_at_frac=fix, lines_per_run=FRESH_LINES)
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
    for name, (seed, count, fix) in WEEKS.items():
        out["detector_" + name] = _week_labels(gen, seed=seed, count=count, fixed_at_frac=fix,
                                               lines_per_run=FRESH_LINES)
    out["detector_repository_week"] = _week_labels(gen, seed=REPO_WEEK[0], count=REPO_WEEK[1])
    for name, labels in out.items():
        assert 0.01 <= sum(labels.values()) / len(labels) <= 0.03, (name, sum(labels.values()))
        out[name] = {"labels": [labels[k] for k in sorted(labels)], "f1": 0.9}
    return out
