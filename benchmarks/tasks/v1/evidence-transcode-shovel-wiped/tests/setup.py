"""Parent-side setup of evidence-transcode-shovel-wiped (run by the verdict runner before any task code, and by the
authoring tool for the hidden values): two fresh weeks with other seeds and fix times, and small hand-made folders
for the cases a detector must get right; the labels never reach the child."""

import importlib.util
import os
import random
import tempfile

WEEKS = {"fresh_week_a": (31, 10_000, 1_702_252_800 + 200_000), "fresh_week_b": (32, 10_000, 1_702_252_800 + 160_000)}
REPO_WEEK = (13, 30_000, None)  # what environment/generate.py wrote into the repository
URL = "https://farm.example/v2/jobs"


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_evidence", os.path.join(tests, "gen_evidence.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Case:
    """One hand-made folder, two hours into the week: uploads, their queued transcode jobs, shovel restarts."""

    def __init__(self, gen):
        self.gen, self.w, self.t0, self.n = gen, gen.Week(random.Random(3)), gen.START + 7200, 0
        self.tags = {}

    def video(self, at, node="shovel-a", up="up-fra1", tag=None, kbps=6000):
        """A video up stores at `at`, its job queued by node's shovel; (video id, queue id)."""
        self.n += 1
        if tag is None:
            tag = self.tags[up] = self.tags.get(up, 0) + 1
        vid, qid, channel = "vid_case%06d" % self.n, "C%011d" % self.n, "ch-%05d" % self.n
        t = self.t0 + at
        self.w.ulog(t, up, "INFO", "uploader", "video %s channel %s 1080p %dkbps stored, job published tag=%d" % (
            vid, channel, kbps, tag))
        self.w.ulog(t + 0.002, up, "DEBUG", "pika.channel", "Publishing to exchange 'media' routing_key="
                    "'transcode.1080p' (delivery_tag=%d, 760 bytes)" % tag)
        self.w.slog(t + 0.05, node, "publish from %s on channel 1 (delivery_tag=%d, transcode.1080p, 760 bytes)"
                    % (up, tag))
        self.w.slog(t + 0.051, node, "%s: queued from %s tag=%d key=transcode.1080p" % (qid, up, tag))
        self.w.slog(t + 0.052, node, "confirm to %s (Basic.Ack delivery_tag=%d)" % (up, tag))
        self.w.ulog(t + 0.1, up, "DEBUG", "pika.channel", "Received <Basic.Ack(['delivery_tag=%d', 'multiple=False'])>"
                    % tag)
        return vid, qid

    def post(self, at, node, qid, what, vid=None, host="farm1"):
        status, tail = {"submitted": (201, " result=submitted"), "503": (503, " result=queued retry_in=900s"),
                        "500": (500, " result=queued retry_in=900s"), "rejected": (422, " result=rejected")}[what]
        t = self.t0 + at
        if vid and what == "submitted":
            self.w.jlog(t - 0.01, host, "job.accepted", video_id=vid, channel="ch-00000", profile="1080p",
                        job_id="job-1", http_status=201)
        elif vid and what == "rejected":
            self.w.jlog(t - 0.01, host, "job.rejected", level="warning", video_id=vid, http_status=422,
                        reason="source unreadable (ffprobe: moov atom not found)")
        elif vid:
            self.w.jlog(t - 0.01, host, "request.failed", level="warning", path="/v2/jobs", http_status=status,
                        video_id=vid, error="farm at capacity: try later" if status == 503 else "database error")
        self.w.slog(t, node, "%s: POST %s via %s attempt=1 status=%d%s" % (qid, URL, host, status, tail))
        if what in ("submitted", "rejected"):
            self.w.slog(t + 0.01, node, "%s: removed" % qid)

    def restart(self, at, node, spill=()):
        for qid in spill:
            self.w.slog(self.t0 + at - 0.3, node, "%s: spilled to /var/lib/jobshovel/retry.db" % qid)
        self.w.slog(self.t0 + at, node, "caught SIGTERM, stopping")
        self.w.slog(self.t0 + at + 2, node, "jobshovel 2.4.1 started, consuming transcode.*, farm %s" % URL)
        for qid in spill:
            self.w.slog(self.t0 + at + 4.5, node, "%s: reloaded from /var/lib/jobshovel/retry.db" % qid)

    def reconnect(self, at, up, lost, to):
        self.w.ulog(self.t0 + at, up, "WARNING", "uploader", "connection to %s lost: StreamLostError: ('Transport "
                    "indicated EOF',); reconnecting" % lost)
        self.w.ulog(self.t0 + at + 3, up, "INFO", "uploader", "connected to %s:5671 (channel 1, confirms on)" % to)

    def write(self, folder):
        self.gen.write_folder(folder, self.w.up, self.w.shovel, self.w.farm, random.Random(2))


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

    @case("wiped_retry_queue")
    def _(c):
        v, q = c.video(1.0)
        c.post(3.0, "shovel-a", q, "503", v)
        c.restart(600.0, "shovel-a")
        c.reconnect(600.1, "up-fra1", "shovel-a", "shovel-b")

    @case("queued_then_submitted")
    def _(c):
        v, q = c.video(1.0)
        c.post(3.0, "shovel-a", q, "503", v)
        c.post(900.0, "shovel-a", q, "submitted", v)

    @case("spilled_then_submitted")
    def _(c):
        v, q = c.video(1.0, node="shovel-b")
        c.post(3.0, "shovel-b", q, "500", v)
        c.restart(600.0, "shovel-b", spill=(q,))
        c.post(1500.0, "shovel-b", q, "submitted", v)

    @case("rejected_unreadable_source")
    def _(c):
        v, q = c.video(1.0)
        c.post(3.0, "shovel-a", q, "rejected", v)
        c.restart(600.0, "shovel-a")

    @case("queued_when_the_logs_end")
    def _(c):
        c.restart(100.0, "shovel-a")
        v, q = c.video(500.0)
        c.post(502.0, "shovel-a", q, "503", v)

    @case("republish_and_high_bitrate")
    def _(c):
        v, q = c.video(1.0, kbps=52000)
        c.w.ulog(c.t0 + 1.001, "up-fra1", "WARNING", "uploader", "video %s source bitrate 52000kbps above 40000kbps: "
                 "slow transcode expected" % v)
        c.w.ulog(c.t0 + 11.0, "up-fra1", "DEBUG", "pika.channel", "Republishing to exchange 'media' routing_key="
                 "'transcode.1080p' (delivery_tag=1, 760 bytes): confirm overdue")
        c.w.slog(c.t0 + 11.05, "shovel-a", "up-fra1 tag=1: duplicate of %s, not queued again" % q)
        c.post(12.0, "shovel-a", q, "submitted", v)
        c.restart(600.0, "shovel-a")
        c.reconnect(600.1, "up-fra1", "shovel-a", "shovel-c")

    @case("restart_on_another_node")
    def _(c):
        a, qa = c.video(1.0, node="shovel-a", up="up-fra1")
        c.post(3.0, "shovel-a", qa, "503", a)
        b, qb = c.video(2.0, node="shovel-b", up="up-ams1")
        c.post(4.0, "shovel-b", qb, "500", b)
        c.restart(700.0, "shovel-b")

    @case("queued_in_the_restart_second")
    def _(c):
        v, q = c.video(1.0)
        c.post(599.2, "shovel-a", q, "503", v)
        c.restart(599.6, "shovel-a")

    @case("queued_twice_then_wiped")
    def _(c):
        v, q = c.video(1.0)
        c.post(3.0, "shovel-a", q, "503", v)
        c.post(900.0, "shovel-a", q, "500", v)
        c.restart(1500.0, "shovel-a")

    @case("same_tag_two_uploaders")
    def _(c):
        a, qa = c.video(1.0, node="shovel-a", up="up-fra1", tag=4242)
        c.post(3.0, "shovel-a", qa, "submitted", a)
        b, qb = c.video(2.0, node="shovel-c", up="up-ams2", tag=4242)
        c.post(4.0, "shovel-c", qb, "503", b)
        c.restart(600.0, "shovel-c")
        c.restart(650.0, "shovel-a")

    @case("spilled_across_days")
    def _(c):
        v, q = c.video(79_000.0, node="shovel-c")  # queued on day 0, the spill and restart on day 1
        c.post(79_002.0, "shovel-c", q, "503", v)
        c.restart(80_000.0, "shovel-c", spill=(q,))
        c.post(81_000.0, "shovel-c", q, "submitted", v)
        v2, q2 = c.video(79_100.0, node="shovel-c")
        c.post(79_101.0, "shovel-c", q2, "500", v2)
        c.restart(86_000.0, "shovel-c")

    @case("repeated_lines_and_reconnects")
    def _(c):
        lost, q1 = c.video(1.0)
        c.post(3.0, "shovel-a", q1, "503", lost)
        fine, q2 = c.video(5.0)
        c.post(6.0, "shovel-a", q2, "503", fine)
        c.reconnect(200.0, "up-fra1", "shovel-b", "shovel-a")
        c.post(300.0, "shovel-a", q2, "submitted", fine)
        c.restart(600.0, "shovel-a")
        c.w.up.extend(list(c.w.up))  # the upload workers' lines shipped twice
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
