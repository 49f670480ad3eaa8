"""Parent-side setup of evidence-sensor-bridge-wiped (run by the verdict runner before any task code, and by the
authoring tool for the hidden values): two fresh weeks with other seeds and fix times, and small hand-made folders
for the cases a detector must get right; the labels never reach the child."""

import importlib.util
import os
import random
import tempfile

WEEKS = {"fresh_week_a": (31, 10_000, 1_702_252_800 + 200_000), "fresh_week_b": (32, 10_000, 1_702_252_800 + 160_000)}
REPO_WEEK = (13, 30_000, None)  # what environment/generate.py wrote into the repository
URL = "https://ingest.example/v1/readings"


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_evidence", os.path.join(tests, "gen_evidence.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Case:
    """One hand-made folder, two hours into the week: readings, their bridged messages, node restarts."""

    def __init__(self, gen):
        self.gen, self.w, self.t0, self.n = gen, gen.Week(random.Random(3)), gen.START + 7200, 0
        self.mids = {}

    def reading(self, at, node="mq-a", gw="gw-wh1", mid=None, temp=-19.0):
        """A reading gw publishes at `at`, queued by node's bridge; (reading id, queue id)."""
        self.n += 1
        if mid is None:
            mid = self.mids[gw] = self.mids.get(gw, 0) + 1
        rid, qid, sensor = "rd_case%06d" % self.n, "C%011d" % self.n, "t-%04d" % self.n
        t = self.t0 + at
        topic = "cold/%s/%s/temp" % (gw[3:], sensor)
        self.w.glog(t, gw, "INFO", "gateway", "reading %s sensor %s temp=%.1fC published mid=%d" % (rid, sensor,
                                                                                                 temp, mid))
        self.w.glog(t + 0.002, gw, "DEBUG", "paho.mqtt.client", "Sending PUBLISH (d0, q1, r0, m%d), 'b'%s'', ... "
                    "(64 bytes)" % (mid, topic))
        self.w.blog(t + 0.05, node, "Received PUBLISH from %s (d0, q1, r0, m%d, '%s', ... (64 bytes))"
                    % (gw, mid, topic))
        self.w.blog(t + 0.051, node, "%s: queued from %s mid=%d topic=%s" % (qid, gw, mid, topic))
        self.w.blog(t + 0.052, node, "Sending PUBACK to %s (m%d, rc0)" % (gw, mid))
        self.w.glog(t + 0.1, gw, "DEBUG", "paho.mqtt.client", "Received PUBACK (Mid: %d)" % mid)
        return rid, qid

    def post(self, at, node, qid, what, rid=None, host="ingest1"):
        status, tail = {"forwarded": (201, " result=forwarded"), "503": (503, " result=queued retry_in=900s"),
                        "500": (500, " result=queued retry_in=900s"), "rejected": (422, " result=rejected")}[what]
        t = self.t0 + at
        if rid and what == "forwarded":
            self.w.jlog(t - 0.01, host, "reading.stored", reading_id=rid, sensor="t-0000", site="wh1", temp_c=-19.0,
                        http_status=201)
        elif rid and what == "rejected":
            self.w.jlog(t - 0.01, host, "reading.rejected", level="warning", reading_id=rid, http_status=422,
                        reason="out of range (sensor fault)")
        elif rid:
            self.w.jlog(t - 0.01, host, "request.failed", level="warning", path="/v1/readings", http_status=status,
                        reading_id=rid, error="backpressure: write queue full" if status == 503 else "database error")
        self.w.blog(t, node, "%s: POST %s via %s attempt=1 status=%d%s" % (qid, URL, host, status, tail))
        if what in ("forwarded", "rejected"):
            self.w.blog(t + 0.01, node, "%s: removed" % qid)

    def restart(self, at, node, save=()):
        for qid in save:
            self.w.blog(self.t0 + at - 0.3, node, "%s: saved to /var/lib/mqbridge/queue.db" % qid)
        self.w.blog(self.t0 + at, node, "caught SIGTERM, stopping")
        self.w.blog(self.t0 + at + 2, node, "mqbridge 3.2.0 started, listening on :8883, bridge to %s" % URL)
        for qid in save:
            self.w.blog(self.t0 + at + 4.5, node, "%s: restored from /var/lib/mqbridge/queue.db" % qid)

    def reconnect(self, at, gw, lost, to):
        self.w.glog(self.t0 + at, gw, "WARNING", "gateway", "connection to %s lost (rc=7); reconnecting" % lost)
        self.w.glog(self.t0 + at + 3, gw, "INFO", "gateway", "connected to %s:8883 (session present: 0)" % to)

    def write(self, folder):
        self.gen.write_folder(folder, self.w.gw, self.w.broker, self.w.ingest, random.Random(2))


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

    @case("wiped_queue")
    def _(c):
        r, q = c.reading(1.0)
        c.post(3.0, "mq-a", q, "503", r)
        c.restart(600.0, "mq-a")
        c.reconnect(600.1, "gw-wh1", "mq-a", "mq-b")

    @case("queued_then_forwarded")
    def _(c):
        r, q = c.reading(1.0)
        c.post(3.0, "mq-a", q, "503", r)
        c.post(900.0, "mq-a", q, "forwarded", r)

    @case("saved_then_forwarded")
    def _(c):
        r, q = c.reading(1.0, node="mq-b")
        c.post(3.0, "mq-b", q, "500", r)
        c.restart(600.0, "mq-b", save=(q,))
        c.post(1500.0, "mq-b", q, "forwarded", r)

    @case("rejected_sensor_fault")
    def _(c):
        r, q = c.reading(1.0, temp=-327.7)
        c.post(3.0, "mq-a", q, "rejected", r)
        c.restart(600.0, "mq-a")

    @case("queued_when_the_logs_end")
    def _(c):
        c.restart(100.0, "mq-a")
        r, q = c.reading(500.0)
        c.post(502.0, "mq-a", q, "503", r)

    @case("dup_resend_and_excursion")
    def _(c):
        r, q = c.reading(1.0, temp=-14.2)
        c.w.glog(c.t0 + 1.001, "gw-wh1", "WARNING", "gateway", "sensor t-0001 above -17.0C (-14.2C): excursion "
                 "alarm raised")
        c.w.glog(c.t0 + 11.0, "gw-wh1", "DEBUG", "paho.mqtt.client", "Sending PUBLISH (d1, q1, r0, m1), "
                 "'b'cold/wh1/t-0001/temp'', ... (64 bytes)")
        c.w.blog(c.t0 + 11.05, "mq-a", "gw-wh1 mid=1: duplicate of %s, not queued again" % q)
        c.post(12.0, "mq-a", q, "forwarded", r)
        c.restart(600.0, "mq-a")
        c.reconnect(600.1, "gw-wh1", "mq-a", "mq-c")

    @case("restart_on_another_node")
    def _(c):
        a, qa = c.reading(1.0, node="mq-a", gw="gw-wh1")
        c.post(3.0, "mq-a", qa, "503", a)
        b, qb = c.reading(2.0, node="mq-b", gw="gw-dc3")
        c.post(4.0, "mq-b", qb, "500", b)
        c.restart(700.0, "mq-b")

    @case("queued_in_the_restart_second")
    def _(c):
        r, q = c.reading(1.0)
        c.post(599.2, "mq-a", q, "503", r)
        c.restart(599.6, "mq-a")

    @case("queued_twice_then_wiped")
    def _(c):
        r, q = c.reading(1.0)
        c.post(3.0, "mq-a", q, "503", r)
        c.post(900.0, "mq-a", q, "500", r)
        c.restart(1500.0, "mq-a")

    @case("same_mid_two_gateways")
    def _(c):
        a, qa = c.reading(1.0, node="mq-a", gw="gw-wh1", mid=4242)
        c.post(3.0, "mq-a", qa, "forwarded", a)
        b, qb = c.reading(2.0, node="mq-c", gw="gw-dc4", mid=4242)
        c.post(4.0, "mq-c", qb, "503", b)
        c.restart(600.0, "mq-c")
        c.restart(650.0, "mq-a")

    @case("saved_across_days")
    def _(c):
        r, q = c.reading(79_000.0, node="mq-c")  # queued on day 0, the save and restart on day 1
        c.post(79_002.0, "mq-c", q, "503", r)
        c.restart(80_000.0, "mq-c", save=(q,))
        c.post(81_000.0, "mq-c", q, "forwarded", r)
        r2, q2 = c.reading(79_100.0, node="mq-c")
        c.post(79_101.0, "mq-c", q2, "500", r2)
        c.restart(86_000.0, "mq-c")

    @case("repeated_lines_and_reconnects")
    def _(c):
        lost, q1 = c.reading(1.0)
        c.post(3.0, "mq-a", q1, "503", lost)
        fine, q2 = c.reading(5.0)
        c.post(6.0, "mq-a", q2, "503", fine)
        c.reconnect(200.0, "gw-wh1", "mq-b", "mq-a")
        c.post(300.0, "mq-a", q2, "forwarded", fine)
        c.restart(600.0, "mq-a")
        c.w.gw.extend(list(c.w.gw))  # the gateways' lines shipped twice
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
