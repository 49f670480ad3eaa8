"""A week of production logs of a training cluster's preemptible jobs, from a seed (stdlib only).

    python generate.py REPO     builds REPO from its pinned pytorch-ignite release and history (sdist_repo.py, a
                                copy of the suite's shared script next to this file: the release the
                                training-platform team's trainers are built on, then its trainops/ tools as a
                                commit), then writes REPO/logs/ (seed 13, 1,200 jobs: ≈ 1,210 files, ≈ 30 MB)

Three sources, joined by job id and checkpoint id:
  logs/trainer/<job>.log                 each job's trainer log (steps, checkpoint saves, preemption, restores)
  logs/scheduler/events-d<day>.jsonl     the scheduler's events (submit, preempt, resume, restart, finish)
  logs/checkpoints/index.csv             the checkpoint store's index (started, finished, step)

The store's bug (fixed in production at a point of the week, not in any repository): when a job was preempted
while a checkpoint upload was in progress, the store answered the resume's "latest checkpoint" query with the
oldest checkpoint it still retained instead of the newest finished one, so the job silently redid work it had
already saved. After the fix the newest finished checkpoint is restored. Harmless anomalies: the steps since the
last save lost at every preemption, unfinished uploads skipped at resume (after the fix), restarts users asked
for from an older checkpoint, jobs preempted before their first save, resumes that waited for a free node (the
scheduler's `pending` events), checkpoint upload parts the object store throttled and the client retried (trainer
warnings), repeated scheduler lines.

The verifier's setup.py imports this file (a copy in tests/) to draw fresh weeks with other seeds and other
fix times; `write_logs` returns the true labels ({job id: restored an older checkpoint than its newest finished});
given a dict as `kinds`, it also fills in the harmless anomaly kinds drawn ({kind: jobs}, or (lines, all lines, unit)
for the repeated scheduler lines) for benchmarks/evidence_stats.py.
"""

from __future__ import annotations

import csv
import json
import os
import random
import sys
import time

WEEK_S = 7 * 24 * 3600
START = 1_701_043_200  # 2023-11-27T00:00:00Z
NODES = tuple("gpu-%02d" % i for i in range(24))
RETAIN = 3  # finished checkpoints the store keeps per job
USERS = ("ana", "bo", "chen", "dev", "eli")


def _hex(rng: random.Random, bits: int = 32) -> str:
    return "%0*x" % (bits // 4, rng.getrandbits(bits))


def stamp(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts)) + ",%03d" % int(ts % 1 * 1000)


class Job:
    """One job's trainer log, scheduler events and checkpoints as they happen."""

    def __init__(self, rng, jid, log_every, noise=None):
        """log_every: steps between two step lines of the trainer log. noise: a second generator that draws the lines
        and events moving no state (throttled upload parts, capacity waits), so that they leave rng's draws alone."""
        self.rng, self.jid, self.log_every, self.noise = rng, jid, log_every, noise
        self.log, self.events, self.ckpts = [], [], []  # ckpts: dicts of the store's index
        self.kinds = set()  # the harmless anomaly kinds the job met (the ground truth evidence_stats.py counts)
        self.loss = rng.uniform(6.0, 9.0)

    def line(self, ts, level, text):
        self.log.append("%s %s [trainer] %s" % (stamp(ts), level, text))

    def event(self, ts, ev, **kw):
        self.events.append({"ts": round(ts, 3), "job": self.jid, "ev": ev, **kw})

    def finished(self, before):
        """The checkpoints finished by `before` and not deleted by then, in the order they finished."""
        return [c for c in self.ckpts if c["finished"] and c["finished"] <= before
                and not (c["deleted"] and c["deleted"] <= before)]

    def train(self, t, step, until_step, rate, every, stop_t):
        """Steps from step to until_step (or until stop_t); (time, step, upload in progress at stop_t or None)."""
        last = until_step if stop_t == float("inf") else min(until_step, step + int((stop_t - t) * rate))
        first_log, first_ckpt = (step // self.log_every + 1) * self.log_every, (step // every + 1) * every
        points = sorted(set(range(first_log, last + 1, self.log_every)) | set(range(first_ckpt, last + 1, every)))
        for p in points:
            tp = t + (p - step) / rate
            if p % self.log_every == 0:
                loss = self.loss * (0.25 + 0.75 * 2.718 ** (-p / 20000.0)) + self.rng.gauss(0, 0.01)
                self.line(tp, "INFO", "step=%d loss=%.4f lr=%.2e tokens_per_s=%d" % (
                    p, loss, 3e-4, int(rate * 4096 * self.rng.uniform(0.95, 1.05))))
            if p % every == 0:
                cid = "ckpt-%s" % _hex(self.rng, 48)
                upload = self.rng.uniform(20.0, 240.0)
                self.line(tp, "INFO", "checkpoint save started id=%s step=%d" % (cid, p))
                c = {"id": cid, "job": self.jid, "step": p, "started": round(tp, 3), "finished": None,
                     "deleted": None, "bytes": self.rng.randint(2 * 10**9, 9 * 10**9)}
                self.ckpts.append(c)
                if tp + upload > stop_t:  # preempted during the upload: the checkpoint never finishes
                    return stop_t, p, c
                c["finished"] = round(tp + upload, 3)
                if self.noise is not None and self.noise.random() < 0.015:  # the store throttled a part: retried
                    self.line(tp + upload * self.noise.uniform(0.2, 0.9), "WARNING", "checkpoint upload id=%s: part %d "
                              "retried after 503 SlowDown" % (cid, self.noise.randint(2, 40)))
                    self.kinds.add("upload_part_retried")
                self.line(tp + upload, "INFO", "checkpoint save finished id=%s step=%d" % (cid, p))
        return (t + (last - step) / rate if last >= until_step else stop_t), last, None

    def retained(self, at):
        return self.finished(at)[-RETAIN:]


def job(rng, jid, t0, fixed_at, lines_per_run, noise=None):
    """One job over the week; (Job, restored an older checkpoint than its newest finished one). noise: see Job."""
    rate = rng.uniform(0.5, 3.0)
    every = max(100, int(rate * rng.uniform(1800, 5400)) // 100 * 100)  # a checkpoint every 30 to 90 minutes
    total = int(rate * rng.uniform(3, 30) * 3600)
    j = Job(rng, jid, max(10, total // lines_per_run // 10 * 10), noise)
    node = rng.choice(NODES)
    j.event(t0, "submit", node=node, user=rng.choice(USERS), steps=total)
    t, step, rolled_back = t0 + rng.uniform(5, 60), 0, False
    j.line(t, "INFO", "starting run steps=%d checkpoint_every=%d" % (total, every))
    preemptions = 0 if rng.random() < 0.35 else rng.randint(1, 3)
    while step < total:
        stop = t + rng.uniform(0.1, 0.6) * (total - step) / rate if preemptions else float("inf")
        if rng.random() < 0.08 and preemptions:  # preempted during an upload
            nxt = (step // every + 1) * every
            stop = t + (nxt - step) / rate + rng.uniform(1.0, 19.0)
        t, step, unfinished = j.train(t, step, total, rate, every, stop)
        if step >= total:
            break
        preemptions -= 1
        j.line(t, "WARNING", "received SIGTERM: preempted by scheduler")
        j.kinds.add("preempted_steps_lost")
        j.event(t, "preempt", node=node, reason=rng.choice(("priority", "maintenance", "spot-reclaim")))
        if noise is not None and noise.random() < 0.15:  # no free node at first: the resume waits for capacity
            j.event(t + noise.uniform(1, 50), "pending", reason="insufficient_capacity", gpus=noise.choice((4, 8)))
            j.kinds.add("resume_waited_for_capacity")
        t += rng.uniform(60, 3600)
        node = rng.choice(NODES)
        newest, kept = j.finished(t), j.retained(t)
        if rng.random() < 0.04 and len(kept) > 1:  # a user asks to go back to an older checkpoint
            target = rng.choice(kept[:-1])
            j.kinds.add("user_restart_from_older")
            j.event(t, "restart", node=node, user=rng.choice(USERS), checkpoint=target["id"])
            for c in j.ckpts:  # the store deletes the checkpoints of the abandoned line of training
                if c["finished"] and c["finished"] > target["finished"]:
                    c["deleted"] = round(t, 3)
        else:
            j.event(t, "resume", node=node)
            if not newest:
                target = None
                j.kinds.add("preempted_before_first_save")
            elif unfinished is not None and t < fixed_at and len(kept) > 1:  # the bug
                target = kept[0]
                rolled_back = True
            else:
                target = newest[-1]
                if unfinished is not None:
                    j.kinds.add("unfinished_upload_skipped")
        t += rng.uniform(20, 90)
        if target is None:
            j.line(t, "INFO", "no checkpoint found; starting from step 0")
            step = 0
        else:
            j.line(t, "INFO", "restored checkpoint id=%s step=%d" % (target["id"], target["step"]))
            step = target["step"]
    j.line(t, "INFO", "run finished step=%d" % step)
    j.event(t, "finish", node=node, status="ok")
    return j, rolled_back


def write_folder(folder: str, jobs: list[Job], rng: random.Random, repeated: dict | None = None):
    """Write the three sources in the production layout under folder. repeated: filled with the scheduler lines
    written twice and all scheduler lines written ({"lines", "of"})."""
    twice = written = 0
    for sub in ("trainer", "scheduler", "checkpoints"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    days = {}
    for j in jobs:
        with open(os.path.join(folder, "trainer", j.jid + ".log"), "w") as f:
            f.writelines(line + "\n" for line in j.log)
        for e in j.events:
            days.setdefault(int((e["ts"] - START) // 86400), []).append(e)
            written += 1
            if rng.random() < 0.2:  # the event bus delivers at least once
                days[int((e["ts"] - START) // 86400)].append(dict(e))
                twice, written = twice + 1, written + 1
    if repeated is not None:
        repeated.update(lines=twice, of=written)
    for day, events in days.items():
        events.sort(key=lambda e: e["ts"])
        with open(os.path.join(folder, "scheduler", "events-d%d.jsonl" % day), "w") as f:
            f.writelines(json.dumps(e, separators=(",", ":")) + "\n" for e in events)
    rows = sorted((c for j in jobs for c in j.ckpts), key=lambda c: c["started"])
    with open(os.path.join(folder, "checkpoints", "index.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=("id", "job", "step", "started", "finished", "deleted", "bytes"))
        w.writeheader()
        w.writerows({k: "" if v is None else v for k, v in c.items()} for c in rows)


def write_logs(folder: str, seed: int = 13, count: int = 1200, fixed_at_frac: float | None = None,
               lines_per_run: int = 250, kinds: dict | None = None) -> dict:
    """Write a week of logs under folder/{trainer,scheduler,checkpoints}; {job id: rolled back too far}. kinds:
    filled with the harmless anomaly kinds drawn (module docstring)."""
    rng = random.Random(seed)
    fixed_at = START + WEEK_S * (fixed_at_frac if fixed_at_frac is not None else rng.uniform(0.25, 0.35))
    jobs, labels = [], {}
    noise = random.Random("noise-%d" % seed)
    for _ in range(count):
        jid = "job-" + _hex(rng)
        j, labels[jid] = job(rng, jid, START + rng.uniform(0, WEEK_S * 0.8), fixed_at, lines_per_run, noise)
        jobs.append(j)
    repeated = {}
    write_folder(folder, jobs, rng, repeated)
    if kinds is not None:
        for j in jobs:
            for name in j.kinds:
                kinds[name] = kinds.get(name, 0) + 1
        kinds["repeated_scheduler_line"] = (repeated["lines"], repeated["of"], "scheduler lines")
    return labels


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
