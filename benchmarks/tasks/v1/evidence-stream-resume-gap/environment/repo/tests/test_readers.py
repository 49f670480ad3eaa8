import json
import os
import tempfile
import unittest

from opskit import gateway, report, worker


class ReadersTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        for sub in ("gateway", "worker", "billing"):
            os.makedirs(os.path.join(self.dir, sub))
        line = {"ts": 10.0, "host": "gw-a", "req": "r1", "conn": 0, "status": 200, "bytes_sent": 5,
                "resume_from": None, "latency_ms": 100}
        with open(os.path.join(self.dir, "gateway", "gw-gw-a-d0-h00.jsonl"), "w") as f:
            f.write(json.dumps(line) + "\n" + json.dumps(line) + "\n")
        with open(os.path.join(self.dir, "worker", "r1.jsonl"), "w") as f:
            f.write(json.dumps({"ts": 9.0, "ev": "start"}) + "\n" + json.dumps({"ts": 10.0, "ev": "end", "total": 5}))
        with open(os.path.join(self.dir, "billing", "billing-d0.csv"), "w") as f:
            f.write("request_id,started,tokens_generated,tokens_billed\nr1,9.0,3,3\n")

    def test_gateway_keeps_duplicates(self):
        self.assertEqual(len(gateway.by_request(self.dir)["r1"]), 2)

    def test_worker_total(self):
        (rid, events), = list(worker.iter_traces(self.dir))
        self.assertEqual((rid, worker.answer_bytes(events)), ("r1", 5))

    def test_report_counts_a_connection_once(self):
        day = report.daily(self.dir)[0]
        self.assertEqual((day["connections"], day["requests"], day["tokens_billed"]), (1, 1, 3))


if __name__ == "__main__":
    unittest.main()
