"""Parent-side setup of evidence-auth-refresh-reuse (run by the verdict runner before any task code, and by the
authoring tool for the hidden values): two fresh weeks with other seeds and other fix times, and small hand-made
folders for the cases a detector must get right; the labels never reach the child."""

import importlib.util
import os
import random
import tempfile

WEEKS = {"fresh_week_a": (81, 3_000, 1_703_595_000), "fresh_week_b": (82, 3_000, 1_703_620_000)}  # seed, sessions, fix
REPO_WEEK = (11, 8_000, None)  # what environment/generate.py wrote into the repository


def _gen(tests):
    spec = importlib.util.spec_from_file_location("gen_evidence", os.path.join(tests, "gen_evidence.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cases(gen, root):
    """The hand-made folders: {case: folder}, two hours into the week."""
    t0 = gen.START + 7200
    cases = {}

    def write(name, steps, ended=()):
        gateway, auth = [], []
        for k, (dt, node, dev, text) in enumerate(steps):
            req = "req_%s_%d" % (name[:4], k)
            gateway.append({"ts": t0 + dt - 0.01, "req": req, "method": "POST", "path": "/oauth/token",
                            "status": 401 if "revoke" in text else 200, "upstream": node, "dev": dev,
                            "ip": "10.0.0.1", "ua": "Acme/8.14.0", "ms": 30, "bytes": 512})
            auth.append((t0 + dt, "%s %s %s" % (gen.iso(t0 + dt), node, text.replace("REQ", req))))
        gateway.append(dict(gateway[1]))  # shipped twice
        rows = [(t0 + dt, fam, "u_1", t0 - 86400, reason) for dt, fam, reason in ended]
        cases[name] = os.path.join(root, name)
        gen.write_folder(cases[name], gateway, auth, rows, random.Random(4))

    # two requests of one phone refreshing at once on two nodes (revoked: hurt); the same on one session granted
    # grace; a new phone taking the session over and the old one refreshing 3 s later (another install: revoked by
    # design); an old generation replayed from elsewhere
    write("migration_and_replay", [
        (1.0, "a1", "dev_A", "refresh fam=fam_hurt gen=3->4 req=REQ"),
        (1.3, "a2", "dev_A", "reuse fam=fam_hurt gen=3 req=REQ action=revoke"),
        (10.0, "a1", "dev_B", "refresh fam=fam_grace gen=5->6 req=REQ"),
        (10.2, "a3", "dev_B", "reuse fam=fam_grace gen=5 req=REQ action=grace"),
        (20.0, "a2", "dev_C2", "refresh fam=fam_migrated gen=2->3 req=REQ"),
        (23.0, "a1", "dev_C", "reuse fam=fam_migrated gen=2 req=REQ action=revoke"),
        (30.0, "a3", "dev_D", "refresh fam=fam_replay gen=7->8 req=REQ"),
        (5000.0, "a3", "dev_X", "reuse fam=fam_replay gen=4 req=REQ action=revoke")],
        [(1.3, "fam_hurt", "revoked_reuse"), (23.0, "fam_migrated", "revoked_reuse"),
         (5000.0, "fam_replay", "revoked_reuse")])
    # a second request 12 s after the rotation (past the grace: revoked by design); one 9.5 s after it on another
    # node (hurt); a session at the end of its 30 days; a user's logout
    write("grace_edge_and_lifetime", [
        (100.0, "a1", "dev_E", "refresh fam=fam_late gen=1->2 req=REQ"),
        (112.0, "a2", "dev_E", "reuse fam=fam_late gen=1 req=REQ action=revoke"),
        (200.0, "a1", "dev_F", "refresh fam=fam_edge gen=9->10 req=REQ"),
        (209.5, "a2", "dev_F", "reuse fam=fam_edge gen=9 req=REQ action=revoke"),
        (300.0, "a3", "dev_G", "expire fam=fam_old"),
        (400.0, "a2", "dev_H", "logout fam=fam_bye reason=user")],
        [(112.0, "fam_late", "revoked_reuse"), (209.5, "fam_edge", "revoked_reuse"), (300.0, "fam_old", "expired"),
         (400.0, "fam_bye", "user")])
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
