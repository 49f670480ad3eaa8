"""Parent-side setup of evidence-payment-spool-wiped (run by the verdict runner before any task code, and by the
authoring tool for the hidden values): two fresh weeks with other seeds and fix times, and small hand-made folders
for the cases a detector must get right; the labels never reach the child."""

import importlib.util
import os
import random
import tempfile

WEEKS = {"fresh_week_a": (31, 10_000, 1_702_252_800 + 200_000), "fresh_week_b": (32, 10_000, 1_702_252_800 + 160_000)}
REPO_WEEK = (13, 30_000, None)  # what environment/generate.py wrote into the repository
URL = "https://shop.example/webhooks/payments"


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_evidence", os.path.join(tests, "gen_evidence.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Case:
    """One hand-made folder, two hours into the week: orders, their callbacks on the relays, node restarts."""

    def __init__(self, gen):
        self.gen, self.w, self.t0, self.n = gen, gen.Week(random.Random(3)), gen.START + 7200, 0

    def order(self, at, node="hook-a", gift=False):
        """A card order whose callback node accepts at `at`; (order, payment intent, event, queue id)."""
        self.n += 1
        order, pi, evt, qid = "ord_case%06d" % self.n, "pi_case%06d" % self.n, "evt_case%06d" % self.n, \
            "Q%09d" % self.n
        t = self.t0 + at
        if gift:
            self.w.jlog(t - 5, "shop1", "order.created", order_id=order, user=self.n, amount=1200, currency="EUR",
                        payment="gift_card", request_id="req_%d" % self.n)
            self.w.alog(t - 4.9, "app1", "INFO", "app.orders", "order %s paid by gift card" % order)
            return order, None, None, None
        self.w.jlog(t - 5, "shop1", "order.created", order_id=order, user=self.n, amount=1200, currency="EUR",
                    payment="card", payment_intent=pi, request_id="req_%d" % self.n)
        self.accept(at, node, qid, evt, pi)
        return order, pi, evt, qid

    def accept(self, at, node, qid, evt, pi, source="psp-edge"):
        self.w.rlog(self.t0 + at, node, "%s: accepted %s type=payment_intent.succeeded object=%s from=%s"
                    % (qid, evt, pi, source))

    def attempt(self, at, node, qid, what, evt=None, pi=None, order=None, host="app2"):
        status, result = {"delivered": (200, "delivered"), "503": (503, "spooled"), "500": (500, "spooled"),
                          "rejected": (409, "rejected")}[what]
        t = self.t0 + at
        if what == "delivered" and order:
            self.w.alog(t - 0.01, host, "INFO", "app.webhooks", "%s %s: order %s marked paid" % (evt, pi, order))
        elif what == "503" and order:
            self.w.alog(t - 0.01, host, "WARNING", "app.webhooks", "%s %s: order %s is locked by a checkout "
                        "request; answered 503" % (evt, pi, order))
        elif what == "500":
            self.w.alog(t - 0.01, host, "ERROR", "waitress", "Exception while serving /webhooks/payments\n%s"
                        % "\n".join(self.gen.TRACE))
        elif what == "rejected" and order:
            self.w.alog(t - 0.01, host, "INFO", "app.webhooks", "%s %s: order %s was cancelled; refund issued, "
                        "answered 409" % (evt, pi, order))
        tail = " result=spooled retry_in=900s" if result == "spooled" else " result=%s" % result
        self.w.rlog(t, node, "%s: POST %s via %s attempt=1 status=%d%s" % (qid, URL, host, status, tail))
        if result != "spooled":
            self.w.rlog(t + 0.01, node, "%s: removed" % qid)

    def backlog(self, at, host="app2", n=3):
        for k in range(n):
            self.w.alog(self.t0 + at + k, host, "WARNING", "waitress.queue", "Task queue depth is %d" % (12 + k))

    def restart(self, at, node):
        self.w.rlog(self.t0 + at, node, "caught SIGTERM, stopping")
        self.w.rlog(self.t0 + at + 2, node, "hookrelay 2.4.1 started, spool /var/spool/hookrelay")

    def write(self, folder):
        self.gen.write_folder(folder, self.w.web, self.w.app, self.w.relay, random.Random(2))


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

    @case("wiped_spool")
    def _(c):
        o, pi, e, q = c.order(1.0)
        c.attempt(3.0, "hook-a", q, "503", e, pi, o)
        c.restart(600.0, "hook-a")

    @case("spooled_then_delivered")
    def _(c):
        o, pi, e, q = c.order(1.0)
        c.attempt(3.0, "hook-a", q, "503", e, pi, o)
        c.attempt(900.0, "hook-a", q, "delivered", e, pi, o)

    @case("handed_over_then_delivered")
    def _(c):
        o, pi, e, q = c.order(1.0, node="hook-b")
        c.attempt(3.0, "hook-b", q, "500", e, pi, o)
        c.w.rlog(c.t0 + 599.5, "hook-b", "%s: removed" % q)
        c.accept(599.6, "hook-c", "R000000001", e, pi, source="hook-b")
        c.restart(600.0, "hook-b")
        c.attempt(1500.0, "hook-c", "R000000001", "delivered", e, pi, o)

    @case("rejected_cancelled")
    def _(c):
        o, pi, e, q = c.order(1.0)
        c.attempt(3.0, "hook-a", q, "rejected", e, pi, o)
        c.restart(600.0, "hook-a")

    @case("spooled_when_the_logs_end")
    def _(c):
        c.restart(100.0, "hook-a")
        o, pi, e, q = c.order(500.0)
        c.attempt(502.0, "hook-a", q, "503", e, pi, o)

    @case("gift_card_and_backlog")
    def _(c):
        c.order(1.0, gift=True)
        c.backlog(25.0)
        o, pi, e, q = c.order(30.0)
        c.attempt(31.0, "hook-a", q, "delivered", e, pi, o)
        c.restart(600.0, "hook-a")

    @case("restart_on_another_node")
    def _(c):
        a, pa, ea, qa = c.order(1.0, node="hook-a")
        c.attempt(3.0, "hook-a", qa, "503", ea, pa, a)
        b, pb, eb, qb = c.order(2.0, node="hook-b")
        c.attempt(4.0, "hook-b", qb, "500", eb, pb, b)
        c.restart(700.0, "hook-b")

    @case("spooled_in_the_restart_second")
    def _(c):
        o, pi, e, q = c.order(1.0)
        c.attempt(599.2, "hook-a", q, "503", e, pi, o)
        c.restart(599.6, "hook-a")

    @case("spooled_twice_then_wiped")
    def _(c):
        o, pi, e, q = c.order(1.0)
        c.attempt(3.0, "hook-a", q, "503", e, pi, o)
        c.attempt(900.0, "hook-a", q, "500", e, pi, o)
        c.restart(1500.0, "hook-a")

    @case("survived_a_restart")
    def _(c):
        o, pi, e, q = c.order(1.0)
        c.attempt(3.0, "hook-a", q, "503", e, pi, o)
        c.restart(600.0, "hook-a")
        c.attempt(900.0, "hook-a", q, "delivered", e, pi, o)

    @case("handed_over_next_day")
    def _(c):
        o, pi, e, q = c.order(79_000.0, node="hook-c")  # spooled on day 0, the hand-over and restart on day 1
        c.attempt(79_002.0, "hook-c", q, "503", e, pi, o)
        c.w.rlog(c.t0 + 79_999.5, "hook-c", "%s: removed" % q)
        c.accept(79_999.6, "hook-a", "R000000002", e, pi, source="hook-c")
        c.restart(80_000.0, "hook-c")
        c.attempt(81_000.0, "hook-a", "R000000002", "delivered", e, pi, o)
        o2, p2, e2, q2 = c.order(79_100.0, node="hook-c")
        c.attempt(79_101.0, "hook-c", q2, "500", e2, p2, o2)
        c.restart(86_000.0, "hook-c")

    @case("repeated_lines_and_backlog")
    def _(c):
        lost, p1, e1, q1 = c.order(1.0)
        c.backlog(2.0)
        c.attempt(3.0, "hook-a", q1, "503", e1, p1, lost)
        fine, p2, e2, q2 = c.order(5.0)
        c.attempt(6.0, "hook-a", q2, "503", e2, p2, fine)
        c.backlog(298.0)
        c.attempt(300.0, "hook-a", q2, "delivered", e2, p2, fine)
        c.restart(600.0, "hook-a")
        c.w.app.extend(list(c.w.app))  # the app servers' lines shipped twice
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
