"""Parent-side setup of evidence-queue-revoked-offset (run by the verdict runner before any task code, and by the
authoring tool for the hidden values): two fresh weeks of logs with other seeds and other fix times, and small
hand-made log folders for the cases a detector must get right; the labels never reach the child."""

import importlib.util
import os
import random
import tempfile

WEEKS = {"fresh_week_a": (1001, 5000, 0.22), "fresh_week_b": (1002, 5000, 0.28)}  # seed, messages, fix time
FRESH_HEARTBEAT_S = 120.0  # sparser heartbeats than the repository's week: the same signal in less time
REPO_WEEK = (11, 12000)  # what environment/generate.py wrote into the repository


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_evidence", os.path.join(tests, "gen_evidence.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cases(gen, root):
    """The hand-made folders: {case: folder}."""
    t = gen.START + 7200.0
    cases = {}

    def folder(name):
        w = gen.Week(random.Random(5))
        cases[name] = os.path.join(root, name)
        return w

    def produce(w, ts, msg, part, attempt, status, offset):
        w.producer.append({"ts": ts, "service": "checkout", "topic": gen.TOPIC, "msg": msg, "order": "ord_" + msg,
                           "attempt": attempt, "partition": part, "status": status, "offset": offset})

    def log(w, ts, level, consumer, event, **fields):
        w.consumer.append(gen.text_line(ts, level, consumer, event, **fields))

    def move(w, ts, part, old, new, committed):
        w.broker.append({"ts": ts, "ev": "move", "partition": part, "from": old, "to": new, "committed": committed,
                         "generation": 321})
        log(w, ts, "INFO", new, "assigned", partition=part, start_offset=committed)

    # a timed-out send reached the broker: its first copy is lost in a move, the second copy is sent
    w = folder("lost_copy_sent_again")
    produce(w, t + 5, "m_dup", 3, 1, "timeout", None)
    produce(w, t + 5.5, "m_dup", 3, 2, "acked", 11)
    log(w, t + 6, "INFO", "mailer-1", "received", partition=3, offset=10, msg="m_dup", attempt=1)
    log(w, t + 6.1, "INFO", "mailer-1", "revoked", partition=3)
    log(w, t + 6.1, "WARN", "mailer-1", "interrupted", partition=3, offset=10, msg="m_dup", reason="partition_revoked")
    move(w, t + 6.1, 3, "mailer-1", "mailer-4", 11)
    log(w, t + 7, "INFO", "mailer-4", "received", partition=3, offset=11, msg="m_dup", attempt=1)
    log(w, t + 7.3, "INFO", "mailer-4", "sent", partition=3, offset=11, msg="m_dup", order="ord_m_dup", ms=80)
    gen.write_folder(cases["lost_copy_sent_again"], w)
    # a poison message dead-lettered; a producer that gave up; neither is the mailer's loss
    w = folder("dead_letter_and_gave_up")
    produce(w, t, "m_poison", 5, 1, "acked", 40)
    for k in (1, 2, 3):
        log(w, t + 30 * k, "INFO", "mailer-2", "received", partition=5, offset=40, msg="m_poison", attempt=k)
        log(w, t + 30 * k + 0.01, "ERROR", "mailer-2", "failed", partition=5, offset=40, msg="m_poison", attempt=k,
            error="TemplateError")
    w.broker.append({"ts": t + 95, "ev": "dead_letter", "partition": 5, "offset": 40, "msg": "m_poison",
                     "consumer": "mailer-2", "queue": gen.TOPIC + ".dlq"})
    for k in (1, 2, 3):
        produce(w, t + 5 * k, "m_gone", 6, k, "timeout", None)
    produce(w, t + 16, "m_gone", 6, 3, "failed", None)
    gen.write_folder(cases["dead_letter_and_gave_up"], w)
    # a move while processing after the fix: the new owner starts at the message and sends it
    w = folder("interrupted_and_redelivered")
    produce(w, t, "m_ok", 7, 1, "acked", 90)
    log(w, t + 1, "INFO", "mailer-0", "received", partition=7, offset=90, msg="m_ok", attempt=1)
    log(w, t + 1.2, "INFO", "mailer-0", "revoked", partition=7)
    log(w, t + 1.2, "WARN", "mailer-0", "interrupted", partition=7, offset=90, msg="m_ok", reason="partition_revoked")
    move(w, t + 1.2, 7, "mailer-0", "mailer-5", 90)
    log(w, t + 2, "INFO", "mailer-5", "received", partition=7, offset=90, msg="m_ok", attempt=1)
    log(w, t + 2.4, "INFO", "mailer-5", "sent", partition=7, offset=90, msg="m_ok", order="ord_m_ok", ms=300)
    gen.write_folder(cases["interrupted_and_redelivered"], w)
    # lost in a move at midnight (the move is in the next day's broker file); a transient failure then sent
    m = gen.START + 86400.0
    w = folder("midnight_loss_and_retry")
    produce(w, m - 3, "m_lost", 2, 1, "acked", 500)
    log(w, m - 0.5, "INFO", "mailer-3", "received", partition=2, offset=500, msg="m_lost", attempt=1)
    log(w, m - 0.05, "WARN", "mailer-3", "interrupted", partition=2, offset=500, msg="m_lost",
        reason="partition_revoked")
    move(w, m + 0.01, 2, "mailer-3", "mailer-1", 501)
    produce(w, m - 60, "m_flaky", 2, 1, "acked", 499)
    log(w, m - 59, "INFO", "mailer-3", "received", partition=2, offset=499, msg="m_flaky", attempt=1)
    log(w, m - 58.6, "ERROR", "mailer-3", "failed", partition=2, offset=499, msg="m_flaky", attempt=1,
        error="SMTPTimeout")
    log(w, m - 29, "INFO", "mailer-3", "received", partition=2, offset=499, msg="m_flaky", attempt=2)
    log(w, m - 28.7, "INFO", "mailer-3", "sent", partition=2, offset=499, msg="m_flaky", order="ord_m_flaky", ms=40)
    gen.write_folder(cases["midnight_loss_and_retry"], w)
    return cases


def fixture(ctx):
    """Folders of the fresh weeks and of the hand-made cases (the child gets paths, never labels)."""
    gen = _gen(ctx["tests"])
    out = {}
    for name, (seed, count, fix) in WEEKS.items():
        folder = os.path.join(ctx["tmp"], name)
        labels = gen.write_logs(folder, seed=seed, count=count, fixed_at_frac=fix, heartbeat_s=FRESH_HEARTBEAT_S)
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
        labels = _week_labels(gen, seed=seed, count=count, fixed_at_frac=fix,
                              heartbeat_s=FRESH_HEARTBEAT_S)
        out["detector_" + name] = labels
    out["detector_repository_week"] = _week_labels(gen, seed=REPO_WEEK[0], count=REPO_WEEK[1])
    for name, labels in out.items():
        assert 0.01 <= sum(labels.values()) / len(labels) <= 0.03, (name, sum(labels.values()))
        out[name] = {"labels": [labels[k] for k in sorted(labels)], "f1": 0.9}
    return out
