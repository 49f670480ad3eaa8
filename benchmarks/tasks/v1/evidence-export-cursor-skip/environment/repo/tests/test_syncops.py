import json
import os
import tempfile
import unittest

from syncops import contacts, report


class SyncopsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        for sub in ("api", "cdc", "snapshot"):
            os.makedirs(os.path.join(self.dir, sub))
        page = {"ts": 10.5, "host": "api-1", "route": "GET /v1/contacts/export", "tenant": "tn_1", "export": "ex_1",
                "cursor": None, "limit": 2, "status": 200, "next": "b2Zmc2V0OjI=", "ids": [1, 2], "ms": 40}
        error = dict(page, ts=11.0, cursor="b2Zmc2V0OjI=", status=503, next=None, ids=None)
        last = dict(page, ts=12.5, cursor="b2Zmc2V0OjI=", next=None, ids=[3])
        with open(os.path.join(self.dir, "api", "api-api-1-d0-h00.jsonl"), "w") as f:
            f.writelines(json.dumps(x) + "\n" for x in (page, page, error, last))
        with open(os.path.join(self.dir, "cdc", "cdc-d0-h00.csv"), "w") as f:
            f.write("ts,tenant,op,id\n11.2,tn_1,delete,2\n11.4,tn_1,insert,4\n11.6,tn_1,update,1\n")
        with open(os.path.join(self.dir, "snapshot", "tn_1.csv"), "w") as f:
            f.write("id\n1\n2\n3\n")

    def test_report_counts_a_repeated_line_once(self):
        self.assertEqual(report.by_tenant(self.dir),
                         {"tn_1": {"exports": 1, "finished": 1, "errors": 1, "pages": 2}})

    def test_counts_at_end(self):
        self.assertEqual(contacts.counts_at_end(self.dir), {"tn_1": 3})


if __name__ == "__main__":
    unittest.main()
