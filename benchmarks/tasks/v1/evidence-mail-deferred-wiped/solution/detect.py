"""Emails a mail relay lost without a bounce (incident INC-5210, "the reset email never came").

The relays' logs (logs/relay, one file per node and day, in time order) follow each message by queue id; the
cleanup line names its Message-ID, which is <JOB@mail.shop.example> for the rq job that sent it (logs/workers say
which job handed which queue id to which relay). A message whose last attempt was deferred and that was never
sent, bounced or handed on (a restarting node moves its deferred queue to another node under a new queue id, same
Message-ID, and logs the old queue id `removed`) was lost if its node stopped (`terminating on signal 15`) after
that deferral. Deferrals later retried, hard bounces, suppressed addresses, jobs retried by rq, and messages still
deferred when the week's logs end are not lost.
"""

import os
import re

LINE = re.compile(r"^\w{3} [ \d]\d \d\d:\d\d:\d\d (\S+) postfix/(\w+)\[\d+\]: (.*)$")
MSGID = re.compile(r"^(\w+): message-id=<([^@>]+)@")
STATUS = re.compile(r"^(\w+): to=<[^>]*>, .* status=(\w+)")
REMOVED = re.compile(r"^(\w+): removed$")


def _relay_files(log_dir):
    """{node: [paths in day order]}."""
    out = {}
    folder = os.path.join(log_dir, "relay")
    for name in os.listdir(folder):
        node, day = name[:-len(".log")].rsplit("-d", 1)
        out.setdefault(node, []).append((int(day), os.path.join(folder, name)))
    return {node: [p for _, p in sorted(paths)] for node, paths in out.items()}


def lost_emails(log_dir):
    """The sorted job ids (str) of the emails whose deferred message a relay restart wiped."""
    job_of, jobs_done = {}, set()
    last = {}  # job -> (node, qid, position of its last deferral) for messages whose last attempt was deferred
    removed, stops = set(), {}
    for node, paths in _relay_files(log_dir).items():
        pos = 0
        stops[node] = []
        for path in paths:
            with open(path) as f:
                for raw in f:
                    pos += 1
                    m = LINE.match(raw.rstrip("\n"))
                    if not m:
                        continue
                    proc, text = m.group(2), m.group(3)
                    if proc == "master":
                        if text.startswith("terminating"):
                            stops[node].append(pos)
                        continue
                    if proc == "cleanup":
                        mm = MSGID.match(text)
                        if mm:
                            job_of[(node, mm.group(1))] = mm.group(2)
                        continue
                    mm = REMOVED.match(text)
                    if mm:
                        removed.add((node, mm.group(1)))
                        continue
                    mm = STATUS.match(text)
                    if mm and (node, mm.group(1)) in job_of:
                        job = job_of[(node, mm.group(1))]
                        if mm.group(2) == "deferred":
                            last[job] = (node, mm.group(1), pos)
                        else:
                            jobs_done.add(job)
    hurt = []
    for job, (node, qid, pos) in last.items():
        if job in jobs_done or (node, qid) in removed:
            continue
        if any(s > pos for s in stops[node]):
            hurt.append(job)
    return sorted(hurt)
