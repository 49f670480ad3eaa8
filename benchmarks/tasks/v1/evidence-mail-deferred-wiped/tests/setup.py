"""Parent-side setup of evidence-mail-deferred-wiped (run by the verdict runner before any task code, and by the
authoring tool for the hidden values): two fresh weeks with other seeds and fix times, and small hand-made folders
for the cases a detector must get right; the labels never reach the child."""

import importlib.util
import os
import random
import tempfile

WEEKS = {"fresh_week_a": (31, 10_000, 1_702_252_800 + 200_000), "fresh_week_b": (32, 10_000, 1_702_252_800 + 160_000)}
REPO_WEEK = (11, 30_000, None)  # what environment/generate.py wrote into the repository
TO = "to=<u%d@web.de>, relay=mx-ha03.web.de[212.227.15.41]:25, delay=%.1f, delays=0.01/0/0.2/0.3"


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_evidence", os.path.join(tests, "gen_evidence.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Case:
    """One hand-made folder, two hours into the week: jobs, their relay messages, node restarts."""

    def __init__(self, gen):
        self.gen, self.w, self.t0, self.n = gen, gen.Week(random.Random(3)), gen.START + 7200, 0

    def email(self, at, node="relay-a", suppressed=False, retried=False):
        """A requested email whose job hands its message to node at `at`; (job, queue id)."""
        self.n += 1
        job, qid, t = "00000000-0000-4000-8000-%012d" % self.n, "4Q%09d" % self.n, self.t0 + at
        self.w.jlog(t - 1, "web1", "email.requested", kind="reset", user=self.n, job_id=job, queue="emails",
                    to_domain="web.de", request_id="req_%d" % self.n)
        if retried:
            self.w.wlog(t - 11, "wk1", "emails: app.mail.tasks.send_email('reset', %d) (%s)" % (self.n, job))
            self.w.wlog(t - 10.6, "wk1", "[Job %s]: exception raised while executing (app.mail.tasks.send_email)\n%s"
                        % (job, "\n".join(self.gen.TRACE)))
        self.w.wlog(t - 0.2, "wk1", "emails: app.mail.tasks.send_email('reset', %d) (%s)" % (self.n, job))
        if suppressed:
            self.w.wlog(t, "wk1", "app.mail.tasks: %s skipped: u%d@web.de is on the suppression list" % (job, self.n))
        else:
            self.w.wlog(t, "wk1", "app.mail.tasks: %s handed to %s: 250 2.0.0 Ok: queued as %s" % (job, node, qid))
            self.arrive(at, node, qid, job)
        self.w.wlog(t + 0.01, "wk1", "emails: Job OK (%s)" % job)
        return job, qid

    def arrive(self, at, node, qid, job):
        t = self.t0 + at
        self.w.rlog(t - 0.05, node, "smtpd", "%s: client=app-wk1[10.0.3.10]" % qid)
        self.w.rlog(t - 0.04, node, "cleanup", "%s: message-id=<%s@mail.shop.example>" % (qid, job))
        self.w.rlog(t + 0.01, node, "qmgr", "%s: from=<no-reply@shop.example>, size=4096, nrcpt=1 (queue active)" % qid)

    def status(self, at, node, qid, what):
        dsn, answer = {"sent": ("2.0.0", "250 2.0.0 OK"), "deferred": ("4.7.1", "451 4.7.1 Greylisted"),
                       "bounced": ("5.1.1", "550 5.1.1 user unknown")}[what]
        self.w.rlog(self.t0 + at, node, "smtp", "%s: %s, dsn=%s, status=%s (host said: %s)" % (
            qid, TO % (self.n, at), dsn, what, answer))
        if what != "deferred":
            self.w.rlog(self.t0 + at + 0.01, node, "qmgr", "%s: removed" % qid)

    def restart(self, at, node):
        self.w.rlog(self.t0 + at, node, "master", "terminating on signal 15")
        self.w.rlog(self.t0 + at + 2, node, "master", "daemon started -- version 3.6.4, configuration /etc/postfix")

    def write(self, folder):
        self.gen.write_folder(folder, self.w.web, self.w.work, self.w.relay, random.Random(2))


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

    @case("wiped_deferral")
    def _(c):
        job, q = c.email(1.0)
        c.status(3.0, "relay-a", q, "deferred")
        c.restart(600.0, "relay-a")

    @case("deferred_then_sent")
    def _(c):
        job, q = c.email(1.0)
        c.status(3.0, "relay-a", q, "deferred")
        c.status(900.0, "relay-a", q, "sent")

    @case("handed_over_then_sent")
    def _(c):
        job, q = c.email(1.0, node="relay-b")
        c.status(3.0, "relay-b", q, "deferred")
        c.w.rlog(c.t0 + 599.5, "relay-b", "qmgr", "%s: removed" % q)
        c.arrive(599.6, "relay-c", "5R000000001", job)
        c.restart(600.0, "relay-b")
        c.status(1500.0, "relay-c", "5R000000001", "sent")

    @case("bounced")
    def _(c):
        job, q = c.email(1.0)
        c.status(3.0, "relay-a", q, "bounced")
        c.restart(600.0, "relay-a")

    @case("deferred_when_the_logs_end")
    def _(c):
        c.restart(100.0, "relay-a")
        job, q = c.email(500.0)
        c.status(502.0, "relay-a", q, "deferred")

    @case("suppressed_and_retried")
    def _(c):
        c.email(1.0, suppressed=True)
        job, q = c.email(30.0, retried=True)
        c.status(31.0, "relay-a", q, "sent")
        c.restart(600.0, "relay-a")

    @case("restart_on_another_node")
    def _(c):
        a, qa = c.email(1.0, node="relay-a")
        c.status(3.0, "relay-a", qa, "deferred")
        b, qb = c.email(2.0, node="relay-b")
        c.status(4.0, "relay-b", qb, "deferred")
        c.restart(700.0, "relay-b")

    @case("deferral_in_the_restart_second")
    def _(c):
        job, q = c.email(1.0)
        c.status(599.2, "relay-a", q, "deferred")
        c.restart(599.6, "relay-a")

    @case("deferred_twice_then_wiped")
    def _(c):
        job, q = c.email(1.0)
        c.status(3.0, "relay-a", q, "deferred")
        c.status(900.0, "relay-a", q, "deferred")
        c.restart(1500.0, "relay-a")

    @case("survived_a_restart")
    def _(c):
        job, q = c.email(1.0)
        c.status(3.0, "relay-a", q, "deferred")
        c.restart(600.0, "relay-a")
        c.status(900.0, "relay-a", q, "sent")

    @case("handed_over_next_day")
    def _(c):
        job, q = c.email(79_000.0, node="relay-c")  # the deferral on day 0, the hand-over and restart on day 1
        c.status(79_002.0, "relay-c", q, "deferred")
        c.w.rlog(c.t0 + 79_999.5, "relay-c", "qmgr", "%s: removed" % q)
        c.arrive(79_999.6, "relay-a", "5R000000002", job)
        c.restart(80_000.0, "relay-c")
        c.status(81_000.0, "relay-a", "5R000000002", "sent")
        other, q2 = c.email(79_100.0, node="relay-c")
        c.status(79_101.0, "relay-c", q2, "deferred")
        c.restart(86_000.0, "relay-c")

    @case("repeated_lines_mixed")
    def _(c):
        lost, q1 = c.email(1.0)
        c.status(3.0, "relay-a", q1, "deferred")
        fine, q2 = c.email(5.0)
        c.status(6.0, "relay-a", q2, "deferred")
        c.status(300.0, "relay-a", q2, "sent")
        c.restart(600.0, "relay-a")
        c.w.work.extend(list(c.w.work))  # the workers' lines shipped twice
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
