"""A week of an app's email requests, its rq workers' logs and the mail relays' logs, from a seed.

    python generate.py REPO     builds REPO from its pinned rq release and history (sdist_repo.py, a copy of the
                                suite's shared script next to this file), then writes REPO/logs/ (seed 11, 30,000
                                emails: ≈ 860 files). Stdlib only.

Three sources, joined by job id (the email's Message-ID is <JOB@mail.shop.example>) and time:
  logs/web/WEB-dDAY-hHOUR.jsonl     the web app's JSON log: requests and `email.requested` (kind, user, job id)
  logs/workers/HOST-dDAY-hHOUR.log  the rq workers (rq's `HH:MM:SS message` format; the day and hour are the
                                    file's): a job's start and `Job OK`, the task's own lines (`JOB handed to RELAY:
                                    250 2.0.0 Ok: queued as QID`, `JOB skipped: ... suppression list`), failures
                                    with their tracebacks (the job is retried by rq's Retry); shipped at least once
  logs/relay/RELAY-dDAY.log         the mail relays' postfix syslog: smtpd, cleanup (message-id), qmgr, smtp
                                    (status=sent, deferred, bounced), qmgr removed, master stop/start; after the fix
                                    a node being restarted first hands its deferred queue to another node (a new
                                    queue id there, the same message-id)

The bug (in the mail vendor's relay deployment, in no repository; fixed at a point of the week): a relay restart
(config pushes, every few hours) wiped the node's deferred queue, so a message deferred by the recipient's server
(greylisting, 4xx) and not yet retried was lost without a bounce. After the fix, the node hands its deferred
messages to another node before it stops. An email is hurt when the restart wiped it. Harmless anomalies: deferrals
retried and sent, deferred messages handed over at a restart (after the fix), hard bounces, addresses on the
suppression list (no relay hand-off), jobs retried after an SMTP disconnect, messages still deferred when the week
ends, repeated worker lines.

The verifier's setup.py imports this file (a copy in tests/) to draw fresh weeks with other seeds and fix times;
`write_logs` returns the true labels ({job id: hurt}); given a dict as `kinds`, it also fills in the
harmless anomaly kinds drawn ({kind: emails}, or (lines, all lines, unit) for the repeated lines) for
benchmarks/evidence_stats.py.
"""

from __future__ import annotations

import bisect
import collections
import datetime
import json
import os
import random
import sys

START = 1_702_252_800  # 2023-12-11T00:00:00Z
WEEK = 7 * 86400
WEBS = ("web1", "web2")
HOSTS = ("wk1", "wk2", "wk3")
RELAYS = ("relay-a", "relay-b", "relay-c")
KINDS = ("reset", "verify", "login_code", "receipt", "receipt", "digest")
DOMAINS = (("gmail.com", "gmail-smtp-in.l.google.com", "142.250.27.26", 0.05),
           ("outlook.com", "outlook-com.olc.protection.outlook.com", "52.101.68.9", 0.12),
           ("web.de", "mx-ha03.web.de", "212.227.15.41", 0.45), ("gmx.net", "mx00.emig.gmx.net", "212.227.17.5", 0.45),
           ("yahoo.com", "mta7.am0.yahoodns.net", "67.195.204.72", 0.2),
           ("corp-mail.example", "mx1.corp-mail.example", "198.51.100.25", 0.6))
GREYLIST = "451 4.7.1 <%s>: Recipient address rejected: Greylisted, see https://postgrey.example/"
STATS = collections.Counter()  # what the last write_logs drew, by kind (for the docs' measurements)
MET = {}  # what the last write_logs drew, by kind: the units that met it (for benchmarks/evidence_stats.py)
LINES = ("repeated worker lines", "worker lines")  # the repeated lines and all lines of their source


def _tally(kind, unit):
    STATS[kind] += 1
    MET.setdefault(kind, set()).add(unit)


TRACE = ("Traceback (most recent call last):",
         '  File "/srv/app/venv/lib/python3.11/site-packages/rq/worker.py", line 1428, in perform_job',
         "    rv = job.perform()",
         '  File "/srv/app/app/mail/tasks.py", line 37, in send_email',
         "    smtp.send_message(msg)",
         "smtplib.SMTPServerDisconnected: Connection unexpectedly closed")


def hms(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%H:%M:%S")


def syslog(t: float) -> str:
    """A syslog line's time, `Dec 11 00:00:01` (the week's days are all two-digit)."""
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%b %d %H:%M:%S")


def jstamp(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _qid(rng):
    return "".join(rng.choice("0123456789BCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz") for _ in range(11))


class Week:
    def __init__(self, rng):
        self.rng, self.web, self.work, self.relay = rng, [], [], []
        self.pids = {r: rng.randrange(900, 1500) for r in RELAYS}

    def jlog(self, t, web, event, **fields):
        self.web.append((t, web, dict({"ts": jstamp(t), "level": "info", "host": web, "event": event}, **fields)))

    def wlog(self, t, host, text):
        self.work.append((t, host, text))

    def rlog(self, t, relay, proc, text):
        self.relay.append((t, relay, "%s %s postfix/%s[%d]: %s" % (
            syslog(t), relay, proc, self.pids[relay] if proc in ("qmgr", "master") else self.rng.randrange(2000, 60000),
            text)))


def write_logs(folder: str, seed: int = 11, count: int = 30_000, fixed_at: float | None = None,
               kinds: dict | None = None) -> dict:
    """Write a week under folder/{web,workers,relay}; {job id: its deferred message wiped by a relay restart}.
    fixed_at (UTC seconds): from when a restarting node hands its deferred queue over (default: day 2 or 3).
    kinds: filled with the harmless anomaly kinds drawn (module docstring)."""
    rng = random.Random(seed)
    STATS.clear()
    MET.clear()
    if fixed_at is None:
        fixed_at = START + WEEK * rng.uniform(0.2, 0.32)  # rebalanced 2026-12-03 from (0.28, 0.4): issue #24 band
    w = Week(rng)
    restarts = {r: [] for r in RELAYS}
    for r in RELAYS:
        t = START + rng.uniform(0, 3600)
        while t < START + WEEK:
            restarts[r].append(t)
            t += rng.uniform(1.2, 3.0) * 3600
    msgs, labels = [], {}
    for _ in range(count):
        t = START + rng.uniform(0, WEEK - 30)
        job = "%032x" % rng.getrandbits(128)
        job = "%s-%s-%s-%s-%s" % (job[:8], job[8:12], job[12:16], job[16:20], job[20:])
        user = rng.randrange(10_000, 900_000)
        kind = rng.choice(KINDS)
        dom = rng.choices(DOMAINS, (40, 20, 8, 8, 10, 6))[0]
        labels[job] = False
        for _ in range(rng.randint(0, 2)):
            w.jlog(t - rng.uniform(1, 600), rng.choice(WEBS), "request.done", method="GET",
                   path=rng.choice(("/account", "/orders", "/settings/security", "/api/session")),
                   http_status=rng.choice((200, 200, 200, 302, 304)), duration_ms=rng.randint(3, 200), user=user,
                   request_id="req_%016x" % rng.getrandbits(64))
        w.jlog(t, rng.choice(WEBS), "email.requested", kind=kind, user=user, job_id=job, queue="emails",
               to_domain=dom[0], request_id="req_%016x" % rng.getrandbits(64))
        msgs.append((t, job, user, kind, dom))
    for t, job, user, kind, dom in msgs:
        p = t + rng.expovariate(1 / 0.4) + 0.05
        host = rng.choice(HOSTS)
        attempt = 0
        while True:
            host = rng.choice(HOSTS)
            w.wlog(p, host, "emails: app.mail.tasks.send_email(%r, %d) (%s)" % (kind, user, job))
            if rng.random() < 0.1 and attempt < 3:
                attempt += 1
                _tally("job retried after SMTP disconnect", job)
                w.wlog(p + 0.4, host, "[Job %s]: exception raised while executing (app.mail.tasks.send_email)\n%s"
                       % (job, "\n".join(TRACE)))
                p += (10, 60, 300)[attempt - 1] + rng.uniform(0.1, 2)
                continue
            break
        if rng.random() < 0.05:
            _tally("suppressed", job)
            w.wlog(p + 0.01, host, "app.mail.tasks: %s skipped: %s@%s is on the suppression list" % (
                job, "u%d" % user, dom[0]))
            w.wlog(p + 0.02, host, "emails: Job OK (%s)" % job)
            w.wlog(p + 0.02, host, "Result is kept for 500 seconds")
            continue
        relay = rng.choice(RELAYS)
        qid = _qid(rng)
        a = p + rng.uniform(0.05, 0.3)
        w.wlog(a, host, "app.mail.tasks: %s handed to %s: 250 2.0.0 Ok: queued as %s" % (job, relay, qid))
        w.wlog(a + 0.01, host, "emails: Job OK (%s)" % job)
        w.wlog(a + 0.01, host, "Result is kept for 500 seconds")
        w.rlog(a - 0.05, relay, "smtpd", "%s: client=app-%s[10.0.3.%d]" % (qid, host, 10 + HOSTS.index(host)))
        w.rlog(a - 0.04, relay, "cleanup", "%s: message-id=<%s@mail.shop.example>" % (qid, job))
        w.rlog(a + 0.01, relay, "qmgr", "%s: from=<no-reply@shop.example>, size=%d, nrcpt=1 (queue active)" % (
            qid, rng.randint(3000, 24000)))
        to = "u%d@%s" % (user, dom[0])
        s = a + rng.uniform(0.2, 2.5)
        first = s
        deferrals = 0
        while True:
            if s >= START + WEEK:
                _tally("deferred at the week's end", job)
                break
            mx = "%s[%s]:25" % (dom[1], dom[2])
            head = "%s: to=<%s>, relay=%s, delay=%.1f, delays=0.01/0/0.2/%.2f" % (qid, to, mx, s - a, s - first + 0.3)
            if rng.random() < 0.025:
                w.rlog(s, relay, "smtp", head + ", dsn=5.1.1, status=bounced (host %s said: 550 5.1.1 <%s>: user "
                       "unknown (in reply to RCPT TO command))" % (mx, to))
                w.rlog(s + 0.01, relay, "bounce", "%s: sender non-delivery notification: %s" % (qid, _qid(rng)))
                w.rlog(s + 0.02, relay, "qmgr", "%s: removed" % qid)
                _tally("bounced", job)
                break
            if rng.random() < (dom[3] if deferrals == 0 else 0.15):
                deferrals += 1
                if deferrals == 1:
                    _tally("deferrals", job)
                w.rlog(s, relay, "smtp", head + ", dsn=4.7.1, status=deferred (host %s said: %s (in reply to RCPT TO "
                       "command))" % (mx, GREYLIST % to))
                nxt = s + rng.uniform(300, 4000)
                k = bisect.bisect_right(restarts[relay], s)
                cut = restarts[relay][k] if k < len(restarts[relay]) else None
                if cut is not None and cut < nxt:
                    if cut < fixed_at:  # the bug: the restart wipes the deferred queue
                        labels[job] = True
                        _tally("hurt", job)
                        break
                    other = rng.choice([r for r in RELAYS if r != relay])  # the fix: handed over first
                    nq = _qid(rng)
                    w.rlog(cut - 0.5, relay, "qmgr", "%s: removed" % qid)
                    w.rlog(cut - 0.4, other, "smtpd", "%s: client=%s[10.0.4.%d]" % (
                        nq, relay, 20 + RELAYS.index(relay)))
                    w.rlog(cut - 0.39, other, "cleanup", "%s: message-id=<%s@mail.shop.example>" % (nq, job))
                    w.rlog(cut - 0.35, other, "qmgr", "%s: from=<no-reply@shop.example>, size=%d, nrcpt=1 (queue "
                           "active)" % (nq, rng.randint(3000, 24000)))
                    _tally("handed over at a restart", job)
                    relay, qid, a = other, nq, cut - 0.4
                s = nxt
                continue
            w.rlog(s, relay, "smtp", head + ", dsn=2.0.0, status=sent (250 2.0.0 OK  %d - gsmtp)" % rng.getrandbits(31))
            w.rlog(s + 0.01, relay, "qmgr", "%s: removed" % qid)
            if deferrals:
                _tally("deferred then sent", job)
            break
    for r in RELAYS:
        for cut in restarts[r]:
            w.rlog(cut, r, "master", "terminating on signal 15")
            w.pids[r] = rng.randrange(900, 30000)
            w.rlog(cut + rng.uniform(1.5, 4), r, "master", "daemon started -- version 3.6.4, configuration "
                   "/etc/postfix")
    write_folder(folder, w.web, w.work, w.relay, rng)
    if kinds is not None:
        kinds.update({name: len(units & labels.keys()) for name, units in MET.items() if name != "hurt"})
        kinds[LINES[0]] = (STATS[LINES[0]], STATS[LINES[1]], LINES[1])
    return labels


def write_folder(folder: str, web: list, work: list, relay: list, rng: random.Random | None = None):
    """Write (t, web, record) app records, (t, host, text) worker lines and (t, relay, text) relay lines in the
    production layout under folder (records outside the week are dropped, as the week's export would)."""
    rng = rng or random.Random(0)
    for sub in ("web", "workers", "relay"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    files = collections.defaultdict(list)
    for t, web, rec in web:
        h = int((t - START) // 3600)
        if 0 <= h < 168:
            files[("web", "%s-d%d-h%02d.jsonl" % (web, h // 24, h % 24))].append((t, json.dumps(rec, separators=(
                ",", ":"))))
    for t, host, text in work:
        h = int((t - START) // 3600)
        if 0 <= h < 168:
            files[("workers", "%s-d%d-h%02d.log" % (host, h // 24, h % 24))].append((t, "%s %s" % (hms(t), text)))
    for t, r, text in relay:
        d = int((t - START) // 86400)
        if 0 <= d < 7:
            files[("relay", "%s-d%d.log" % (r, d))].append((t, text))
    for (sub, name), group in sorted(files.items()):
        group.sort(key=lambda x: x[0])
        if sub == "workers":  # at-least-once shipping
            n = len(group)
            group = [x for x in group for _ in range(2 if rng.random() < 0.05 else 1)]
            STATS["repeated worker lines"] += len(group) - n
            STATS["worker lines"] += len(group)
        with open(os.path.join(folder, sub, name), "w") as f:
            f.writelines(text + "\n" for _, text in group)


def _build(repo: str) -> None:
    """The pinned release and its history (the shared sdist_repo.py, a byte-identical copy next to this file)."""
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("sdist_repo", os.path.join(here, "sdist_repo.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build(repo)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: generate.py REPO")
    _build(sys.argv[1])
    write_logs(os.path.join(sys.argv[1], "logs"))
