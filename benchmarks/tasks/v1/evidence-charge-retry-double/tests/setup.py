"""Parent-side setup of evidence-charge-retry-double (run by the verdict runner before any task code, and by the
authoring tool for the hidden values): two fresh weeks of logs with other seeds and other fix times, and small
hand-made log folders for the cases a detector must get right; the labels never reach the child."""

import importlib.util
import os
import random
import tempfile

WEEKS = {"fresh_week_a": (1001, 3000, 0.22), "fresh_week_b": (1002, 3000, 0.28)}  # seed, purchases, fix time
REPO_WEEK = (7, 6000)  # what environment/generate.py wrote into the repository


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_evidence", os.path.join(tests, "gen_evidence.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cases(gen, root):
    """The hand-made folders: {case: folder}."""
    t = gen.START + 3600.0
    acct = "acct_0badc0de"

    def charge(ts, key, req, attempt, shard, status, trace, txn, host="edge-1"):
        return gen.gateway_line(ts, host, "POST /v1/charges", req, key, attempt, shard, status, trace,
                                txn if status == 200 else None, 30000 if status == 504 else 120, acct)

    def row(txn, ts, trace, kind="charge", amount=1999):
        return gen.ledger_row(txn, acct, kind, amount, ts, trace)

    cases, rng = {}, random.Random(3)

    def write(name, gateway, ledger):
        cases[name] = os.path.join(root, name)
        gen.write_folder(cases[name], gateway, ledger, random.Random(rng.random()))

    # the gateway gives up after two timeouts; the client retries the key under a new request id: a second charge
    write("client_retry_new_request",
          [charge(t + 30, "ik_a", "req_a1", 1, "s0", 504, "tr_a1", None),
           charge(t + 62, "ik_a", "req_a1", 2, "s1", 504, "tr_a2", None, host="edge-2"),
           charge(t + 95, "ik_a", "req_a2", 1, "s2", 200, "tr_a3", "tx_a2", host="edge-3")],
          [("s0", row("tx_a1", t + 0.4, "tr_a1")), ("s2", row("tx_a2", t + 94.6, "tr_a3"))])
    # a timeout after the write, retried on the same shard: answered with the first transaction
    write("same_shard_retry",
          [charge(t + 30, "ik_b", "req_b1", 1, "s1", 504, "tr_b1", None),
           charge(t + 31.5, "ik_b", "req_b1", 2, "s1", 200, "tr_b2", "tx_b1", host="edge-2")],
          [("s1", row("tx_b1", t + 0.3, "tr_b1"))])
    # the same routing once the key is looked up on every shard: one charge
    write("retry_other_shard_deduplicated",
          [charge(t + 30, "ik_c", "req_c1", 1, "s0", 504, "tr_c1", None),
           charge(t + 31.2, "ik_c", "req_c1", 2, "s2", 200, "tr_c2", "tx_c1"),
           charge(t + 31.2, "ik_c", "req_c1", 2, "s2", 200, "tr_c2", "tx_c1")],
          [("s0", row("tx_c1", t + 0.2, "tr_c1"))])
    # one charge exported twice, refunded; the same item bought again 40 s later under another key
    write("exported_twice_refund_and_repeat",
          [charge(t + 0.5, "ik_d", "req_d1", 1, "s3", 200, "tr_d1", "tx_d1"),
           charge(t + 40.5, "ik_e", "req_e1", 1, "s0", 200, "tr_e1", "tx_e1"),
           gen.gateway_line(t + 7200, "edge-2", "POST /v1/refunds", "req_d9", "rk_d", 1, "s1", 200, "tr_d9", "tx_d9",
                            90, acct)],
          [("s3", row("tx_d1", t + 0.3, "tr_d1")), ("s3", row("tx_d1", t + 0.3, "tr_d1")),
           ("s0", row("tx_e1", t + 40.2, "tr_e1")), ("s1", row("tx_d9", t + 7199.8, "tr_d9", "refund", -1999))])
    # a retry across midnight on another edge host and shard before the fix: two charges in two days' exports
    m = gen.START + 86400.0
    write("across_midnight",
          [charge(m - 5, "ik_f", "req_f1", 1, "s3", 504, "tr_f1", None),
           charge(m + 26.5, "ik_f", "req_f1", 2, "s0", 200, "tr_f2", "tx_f2", host="edge-3"),
           charge(m + 26.5, "ik_f", "req_f1", 2, "s0", 200, "tr_f2", "tx_f2", host="edge-3"),
           charge(m - 100, "ik_g", "req_g1", 1, "s1", 504, "tr_g1", None),
           charge(m - 68, "ik_g", "req_g1", 2, "s2", 200, "tr_g2", "tx_g2")],
          [("s3", row("tx_f1", m - 34.7, "tr_f1")), ("s0", row("tx_f2", m + 26.2, "tr_f2")),
           ("s2", row("tx_g2", m - 68.3, "tr_g2"))])
    return cases


def fixture(ctx):
    """Folders of the fresh weeks and of the hand-made cases (the child gets paths, never labels)."""
    gen = _gen(ctx["tests"])
    out = {}
    for name, (seed, count, fix) in WEEKS.items():
        folder = os.path.join(ctx["tmp"], name)
        out[name] = {"dir": folder, "ids": sorted(gen.write_logs(folder, seed=seed, count=count, fixed_at_frac=fix))}
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
    for name, (seed, count, fix) in list(WEEKS.items()) + [("repository_week", REPO_WEEK + (None,))]:
        labels = _week_labels(gen, seed=seed, count=count, fixed_at_frac=fix)
        assert 0.01 <= sum(labels.values()) / len(labels) <= 0.03, (name, sum(labels.values()))
        out["detector_" + name] = {"labels": [labels[k] for k in sorted(labels)], "f1": 0.9}
    return out
