"""A tiny export folder in the production layout, for the tests."""

import json
import os
import tempfile

from hookops.timefmt import format_iso

T0 = 1_702_252_800.0  # 2023-12-11T00:00:00Z
URL = "https://hooks.acme.io/in"


def line(t, worker, delivery, event, endpoint, tr, status, ms=40, url=URL, via=None):
    return "%s %s %s %s %s try=%s POST %s -> %s %dms%s\n" % (format_iso(t), worker, delivery, event, endpoint, tr,
                                                             url, status, ms, " via=%s" % via if via else "")


def build():
    """A folder: dl_a delivered first try, dl_b retried then delivered, dl_c dead after 8, dl_d failed (410),
    dl_e followed a 308; one repeated line; a manual redelivery of dl_c answered 200."""
    d = tempfile.mkdtemp(prefix="hookops-")
    for sub in ("events", "workers", "outbox"):
        os.makedirs(os.path.join(d, sub))
    events = [{"id": "evt_%s" % k, "type": "invoice.paid", "tenant": "acme", "created": T0 + 10 + i,
               "api_version": "2023-10-16", "data": {"object": {}}} for i, k in enumerate("abcde")]
    with open(os.path.join(d, "events", "events-d0-h00.jsonl"), "w") as f:
        f.writelines(json.dumps(e) + "\n" for e in events)
    w = [line(T0 + 11, "w1", "dl_a", "evt_a", "ep_1", 1, "200", 120),
         line(T0 + 12, "w2", "dl_b", "evt_b", "ep_1", 1, "503"),
         line(T0 + 45, "w3", "dl_b", "evt_b", "ep_1", 2, "204"),
         line(T0 + 14, "w1", "dl_d", "evt_d", "ep_2", 1, "410"),
         line(T0 + 15, "w4", "dl_e", "evt_e", "ep_3", 1, "308"),
         line(T0 + 15.2, "w4", "dl_e", "evt_e", "ep_3", 1, "200", url="https://hooks2.acme.io/in", via="308")]
    t = T0 + 13
    journal = ["delivery,event,endpoint,state,at,attempts\n"]
    for k, gap in enumerate((0, 30, 120, 600, 1800, 3600, 10800, 21600)):
        t += gap
        w.append(line(t, "w%d" % (1 + k % 4), "dl_c", "evt_c", "ep_2", k + 1, "timeout", 10000))
        journal.append("dl_c,evt_c,ep_2,%s,%.3f,%d\n" % ("dead" if k == 7 else "retrying", t + 0.05, k + 1))
    w.append(line(T0 + 40000, "w2", "dl_c", "evt_c", "ep_2", "manual", "200"))
    w.append(w[0])  # shipped twice
    with open(os.path.join(d, "workers", "all-d0-h00.log"), "w") as f:
        f.writelines(w)
    for did, k, state, at, n in (("dl_a", "a", "delivered", 11.1, 1), ("dl_b", "b", "delivered", 45.1, 2),
                                 ("dl_d", "d", "failed", 14.1, 1), ("dl_e", "e", "delivered", 15.3, 1)):
        journal.append("%s,evt_%s,ep_%d,%s,%.3f,%d\n" % (did, k, 3 if k == "e" else 2 if k == "d" else 1, state,
                                                          T0 + at, n))
    for did, k, ep in (("dl_a", "a", 1), ("dl_b", "b", 1), ("dl_c", "c", 2), ("dl_d", "d", 2), ("dl_e", "e", 3)):
        journal.insert(1, "%s,evt_%s,ep_%d,queued,%.3f,0\n" % (did, k, ep, T0 + 10.5))
    with open(os.path.join(d, "outbox", "journal-d0.csv"), "w") as f:
        f.writelines(journal)
    return d
