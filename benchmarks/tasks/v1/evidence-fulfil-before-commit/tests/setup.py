"""Parent-side setup of evidence-fulfil-before-commit (run by the verdict runner before any task code, and by the
authoring tool for the hidden values): two fresh weeks with other seeds and fix times, and small hand-made folders
for the cases a detector must get right; the labels never reach the child."""

import importlib.util
import os
import random
import tempfile

WEEKS = {"fresh_week_a": (41, 8_000, 1_702_252_800 + 190_000), "fresh_week_b": (42, 8_000, 1_702_252_800 + 250_000)}
REPO_WEEK = (7, 24_000, None)  # what environment/generate.py wrote into the repository


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_evidence", os.path.join(tests, "gen_evidence.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Case:
    """One hand-made folder: checkout records, worker lines and commits, two hours into the week."""

    def __init__(self, gen):
        self.gen, self.w, self.t0, self.n = gen, gen.Week(random.Random(3)), gen.START + 7200, 0

    def save(self, order, txid, at, status, commit_dt=0.2, declined=False, after_commit=False):
        """The checkout saves the order (status) in transaction txid and sends its message; the message's id."""
        t = self.t0 + at
        self.n += 1
        mid = "00000000-0000-4000-8000-%012d" % self.n
        self.w.jlog(t, "web1", "order.saved", request_id="req_%d" % self.n, order=order, status=status, txid=txid,
                    customer="cus_1", cart=[{"sku": "SKU-00097", "qty": 1, "price": 1999}], total=1999,
                    currency="EUR")
        sent = t + commit_dt + 0.001 if after_commit else t + 0.004
        if declined:
            self.w.jlog(t + commit_dt, "web1", "payment.declined", request_id="req_%d" % self.n, order=order,
                        txid=txid, reason="do_not_honor")
            self.w.jlog(t + commit_dt + 0.002, "web1", "request.done", request_id="req_%d" % self.n,
                        method="POST", path="/api/checkout", http_status=402, duration_ms=210, customer="cus_1",
                        user_agent="shop-app/5.12.0")
        else:
            self.w.commits.append((t + commit_dt, txid))
        self.w.jlog(sent, "web1", "message.sent", request_id="req_%d" % self.n, actor="fulfil_order",
                    queue="fulfilment", message_id=mid, order=order, txid=txid)
        return mid

    def run(self, at, order, mid, outcome, host="wk2", repeat=False):
        """A worker receives the message at `at` and the actor ends in outcome: skip, ship, missing, warehouse."""
        t, th = self.t0 + at, "Thread-3"
        lines = [(t, "dramatiq.worker.WorkerThread", "DEBUG", "Received message fulfil_order(%d) with id %r." % (
            order, mid))]
        if outcome == "skip":
            lines.append((t + 0.002, "shop.fulfilment.actors", "INFO", "order %d: status pending, not fulfilling"
                          % order))
        elif outcome == "ship":
            lines.append((t + 0.2, "shop.fulfilment.actors", "INFO", "order %d: sent to warehouse wh-ams (pick "
                          "PK000000042)" % order))
        else:
            trace = self.gen.TRACE_MISSING if outcome == "missing" else self.gen.TRACE_WAREHOUSE
            lines.append((t + 0.01, "dramatiq.worker.WorkerThread", "ERROR", "Failed to process message "
                          "fulfil_order(%d) with unhandled exception.\n%s" % (order, "\n".join(trace))))
        for lt, logger, level, text in lines:
            for _ in range(2 if repeat else 1):
                self.w.wlog(lt, host, th, logger, level, text)

    def retry(self, at, mid, ms=15000):
        self.w.wlog(self.t0 + at, "wk2", "Thread-3", "dramatiq.middleware.retries.Retries", "INFO",
                    "Retrying message %r in %d milliseconds." % (mid, ms))

    def write(self, folder):
        self.gen.write_folder(folder, self.w.web, self.w.work, self.w.commits, random.Random(2))


def _cases(gen, root):
    """The hand-made folders: {case: folder}."""
    cases = {}

    def case(name):
        def wrap(build):
            c = _Case(gen)
            build(c)
            cases[name] = os.path.join(root, name)
            c.write(cases[name])
        return wrap

    def paylater(c, order, tx, paid_at, read_dt, declined=False, commit_dt=0.2):
        """Saved pending (skipped as designed), then paid at paid_at; its message read read_dt after the save."""
        m = c.save(order, tx, 0.0, "pending", commit_dt=0.02)
        c.run(0.5, order, m, "skip")
        m = c.save(order, tx + 1, paid_at, "paid", commit_dt=commit_dt, declined=declined)
        c.run(paid_at + read_dt, order, m, "skip" if read_dt < commit_dt or declined else "ship")

    @case("paid_read_before_commit")
    def _(c):
        paylater(c, 4100001, 501, 3600.0, 0.02)

    @case("declined_read_as_pending")
    def _(c):
        paylater(c, 4100002, 503, 4000.0, 0.02, declined=True)

    @case("new_order_retried")
    def _(c):
        m = c.save(4100003, 505, 20.0, "paid", commit_dt=0.3)
        c.run(20.01, 4100003, m, "missing")
        c.retry(20.02, m)
        c.run(35.4, 4100003, m, "ship")

    @case("pending_skips_only")
    def _(c):
        for k, order in enumerate((4100004, 4100005)):
            m = c.save(order, 507 + k, 60.0 * k, "pending", commit_dt=0.03)
            c.run(60.0 * k + 0.4, order, m, "skip")

    @case("paid_after_fix")
    def _(c):
        m = c.save(4200001, 511, 0.0, "pending", commit_dt=0.02)
        c.run(0.3, 4200001, m, "skip")
        m = c.save(4200001, 512, 1800.0, "paid", commit_dt=0.03, after_commit=True)
        c.run(1800.035, 4200001, m, "ship")

    @case("warehouse_outage_replayed")
    def _(c):
        m = c.save(4200002, 513, 100.0, "paid", commit_dt=0.02)
        at = 100.1
        for k in range(5):
            c.run(at, 4200002, m, "warehouse")
            c.retry(at + 0.02, m, 15000 * 2 ** k)
            at += 15 * 2 ** k + 0.1
        c.w.wlog(c.t0 + at, "wk2", "Thread-3", "dramatiq.middleware.retries.Retries", "WARNING",
                 "Retries exceeded for message %r." % m)
        c.run(86400.0 - 7200 + 9 * 3600, 4200002, "00000000-0000-4000-8000-999999999999", "ship", host="wk4")

    @case("hour_boundary_repeated")
    def _(c):
        m = c.save(4200003, 515, 0.0, "pending", commit_dt=0.02)
        c.run(0.3, 4200003, m, "skip", repeat=True)
        m = c.save(4200003, 516, 3599.99, "paid", commit_dt=0.4)
        c.run(3600.05, 4200003, m, "skip", repeat=True)

    @case("declined_new_order")
    def _(c):
        m = c.save(4200004, 517, 30.0, "paid", commit_dt=0.25, declined=True)
        at = 30.01
        for k in range(5):
            c.run(at, 4200004, m, "missing")
            c.retry(at + 0.02, m, 15000 * 2 ** k)
            at += 15 * 2 ** k + 0.1

    @case("mixed_hour")
    def _(c):
        paylater(c, 4300001, 521, 1000.0, 0.01)
        paylater(c, 4300002, 523, 1100.0, 0.015, declined=True)
        m = c.save(4300003, 525, 1200.0, "paid", commit_dt=0.5)
        c.run(1200.02, 4300003, m, "missing")
        c.retry(1200.03, m)
        c.run(1215.6, 4300003, m, "ship")

    @case("slow_commit_read_after")
    def _(c):
        paylater(c, 4300004, 527, 500.0, 1.6, commit_dt=1.5)

    @case("two_paylater_one_hurt")
    def _(c):
        paylater(c, 4300005, 529, 2000.0, 0.9, commit_dt=0.8)
        paylater(c, 4300006, 531, 2100.0, 0.85, commit_dt=0.9)

    @case("pending_message_late")
    def _(c):
        m = c.save(4300007, 533, 0.0, "pending", commit_dt=0.02)
        c.run(890.0, 4300007, m, "skip")  # the queue fell behind: the pending save's message read 15 min late
        m = c.save(4300007, 534, 900.0, "paid", commit_dt=0.05)
        c.run(900.2, 4300007, m, "ship")
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
