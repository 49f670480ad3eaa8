"""Jobs that resumed from an older checkpoint than the newest one they had finished saving.

At every resume the trainer logs the checkpoint it restored. The store's index says which checkpoints finished
uploading, and when. A resume should restore the job's checkpoint that finished last before the resume (an upload cut by
the preemption never finished and does not count; after a restart from an older checkpoint the newest is the
latest saved, not the highest step); restoring another one redoes saved work.
Restarts a user asked for (the scheduler's `restart` events, with the checkpoint named) are deliberate, and
the store deletes the checkpoints newer than the one restarted from (the index's `deleted` time).
"""

import csv
import json
import os
import re
import time

RESTORED = re.compile(r"^(\S+ \S+) INFO \[trainer\] restored checkpoint id=(\S+) step=(\d+)")


def _ts(stamp):
    day, frac = stamp.split(",")
    return time.mktime(time.strptime(day, "%Y-%m-%d %H:%M:%S")) - time.timezone + int(frac) / 1000


def rolled_back(log_dir):
    """The ids of the jobs that restored an older checkpoint than their newest finished one, unasked."""
    finished = {}
    with open(os.path.join(log_dir, "checkpoints", "index.csv"), newline="") as f:
        for row in csv.DictReader(f):
            if row["finished"]:
                deleted = float(row["deleted"]) if row["deleted"] else float("inf")
                finished.setdefault(row["job"], []).append((float(row["finished"]), deleted, row["id"]))
    starts = {}  # job -> [(time, event)] of the scheduler's resumes and restarts
    folder = os.path.join(log_dir, "scheduler")
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            for line in f:
                e = json.loads(line)
                if e["ev"] in ("resume", "restart"):
                    starts.setdefault(e["job"], []).append((e["ts"], e["ev"]))
    out = set()
    folder = os.path.join(log_dir, "trainer")
    for name in os.listdir(folder):
        jid = name[:-len(".log")]
        with open(os.path.join(folder, name)) as f:
            for line in f:
                m = RESTORED.match(line)
                if not m:
                    continue
                at = _ts(m.group(1))
                before = [ev for t, ev in sorted(starts.get(jid, [])) if t <= at]
                if before and before[-1] == "restart":  # the checkpoint a user asked for
                    continue
                done = [(t, cid) for t, gone, cid in finished.get(jid, []) if t <= at and gone > at]
                if done and m.group(2) != max(done)[1]:
                    out.add(jid)
    return sorted(out)
